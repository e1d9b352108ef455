// `stepprof report`: where an update's time goes and what to change.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/report.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof::cli {
namespace {

struct ReportOptions {
  InputOptions input;
  std::string format = "text";
  std::string output;
};

int run_report(const ReportOptions& opt) {
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  if (auto stop = load_input(opt.input, diag, in)) return *stop;
  const AnalysisInput ain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const Report report = build_report(ain);
  if (interrupted()) {
    fmt::print(stderr, "stepprof: interrupted\n");
    return kInterrupted;
  }
  std::string text;
  if (opt.format == "json") text = render_json(report, diag);
  else if (opt.format == "markdown") text = render_markdown(report, diag);
  else text = render_text(report, diag);
  const int status = finish(diag);
  if (!write_output(opt.output, text)) return interrupted() ? kInterrupted : kUsage;
  // Freeing millions of records one by one takes longer than exiting: leave large
  // inputs to the OS (std::exit skips this frame's destructors; output is flushed).
  constexpr std::size_t kExitWithoutFree = 100'000;  // updates
  if (in.data.update_count() >= kExitWithoutFree) {
    std::fflush(nullptr);
    std::exit(status);
  }
  return status;
}

}  // namespace

void add_report_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "explain where each optimizer update's time goes and what to change");
  add_input_options(*cmd, opt->input);
  cmd->add_option("--format", opt->format, "text (default), json or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  cmd->add_option("-o,--output", opt->output, "write the report to FILE instead of stdout");
  cmd->callback([opt, set_action] { set_action([opt] { return run_report(*opt); }); });
}

}  // namespace stepprof::cli
