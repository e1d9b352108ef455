// `stepprof report`: where an update's time goes and what to change.
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
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
  std::string text;
  if (opt.format == "json") text = render_json(report, diag);
  else if (opt.format == "markdown") text = render_markdown(report, diag);
  else text = render_text(report, diag);
  const int status = finish(diag);
  if (!write_output(opt.output, text)) return kUsage;
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
