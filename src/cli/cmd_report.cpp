// `stepprof report`: where an update's time goes and what to change.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/report.hpp"
#include "stepprof/analysis/series.hpp"
#include "stepprof/render/exports.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof::cli {
namespace {

struct ReportOptions {
  InputOptions input;
  std::string format = "text";
  std::string output;
  std::string out_dir;  ///< --out DIR, for --format csv
};

// --format csv: several tables, written as DIR/<name>.csv.
bool write_csv(const std::string& dir, const Report& report, const AnalysisInput& in) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    fmt::print(stderr, "stepprof: cannot create directory {}: {}\n", dir, ec.message());
    return false;
  }
  for (const auto& file : render_csv(report, build_series(in, report)))
    if (!write_output((std::filesystem::path(dir) / file.name).string(), file.text)) return false;
  return true;
}

int run_report(const ReportOptions& opt) {
  if ((opt.format == "csv") != !opt.out_dir.empty()) {
    fmt::print(stderr, "stepprof: {}\n", opt.format == "csv" ? "--format csv writes several files: give --out DIR"
                                                             : "--out DIR goes with --format csv; use -o FILE");
    return kUsage;
  }
  if (opt.format == "csv" && !opt.output.empty()) {
    fmt::print(stderr, "stepprof: --format csv writes to --out DIR, not -o FILE\n");
    return kUsage;
  }
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (auto stop = load_input(input, diag, in)) return *stop;
  arm_exit_on_interrupt();  // (until the output is written)
  const AnalysisInput ain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const Report report = build_report(ain);
  if (opt.format == "csv") {
    const int status = finish(diag);
    return write_csv(opt.out_dir, report, ain) ? status : output_failed();
  }
  std::string text;
  if (opt.format == "json") text = render_json(report, diag);
  else if (opt.format == "markdown") text = render_markdown(report, diag);
  else text = render_text(report, diag);
  const int status = finish(diag);
  if (!write_output(opt.output, text)) return output_failed();
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
  cmd->add_option("--format", opt->format, "text (default), json, markdown, or csv (tables in --out DIR)")
      ->check(CLI::IsMember({"text", "json", "markdown", "csv"}));
  cmd->add_option("-o,--output", opt->output, "write the report to FILE instead of stdout");
  cmd->add_option("--out", opt->out_dir,
                  "with --format csv: directory for updates.csv, regions.csv and summary.csv (created if missing)");
  cmd->callback([opt, set_action] { set_action([opt] { return run_report(*opt); }); });
}

}  // namespace stepprof::cli
