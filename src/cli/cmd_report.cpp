// `stepprof report`: where an update's time goes and what to change.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "../util/made_directories.hpp"
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

// --format csv: several tables, written as DIR/<name>.csv. Each is written beside its
// place first and all are renamed into place once every one is written, so that a
// failure or an interrupt leaves DIR as it was (not one new table among old ones).
bool write_csv(const std::string& dir, const Report& report, const AnalysisInput& in) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // DIR and any missing parents: a failure removes them again.
  detail::MadeDirectories made;
  if (!made.make(dir, ec)) {
    print_stderr("stepprof: cannot create directory {}: {}\n", dir, ec.message());
    return false;
  }
  std::vector<std::pair<fs::path, fs::path>> staged;  // (written, its place)
  auto drop = [&] {
    for (const auto& [written, place] : staged) fs::remove(written, ec);
    made.remove_empty();
    return false;
  };
  const SeriesBuilder series(in, report);
  for (const auto& table : csv_tables(report, series)) {  // (each written as it is made)
    const fs::path place = fs::path(dir) / table.name;
    fs::path written = place;
    written += fmt::format(".partial-{}", ::getpid());
    if (!write_output_pieces(written.string(), table.write, place.string())) return drop();
    staged.emplace_back(written, place);
  }
  if (interrupted()) return drop();
  for (const auto& [written, place] : staged)  // (a rename over a directory would fail halfway)
    if (fs::exists(place, ec) && !fs::is_regular_file(place, ec)) {
      print_stderr("stepprof: cannot write {}: it is not a regular file\n", place.string());
      return drop();
    }
  for (std::size_t i = 0; i < staged.size(); ++i) {
    fs::rename(staged[i].first, staged[i].second, ec);
    if (ec) {
      print_stderr("stepprof: cannot write {}: {}\n", staged[i].second.string(), ec.message());
      staged.erase(staged.begin(), staged.begin() + static_cast<std::ptrdiff_t>(i));
      return drop();
    }
  }
  return true;
}

int run_report(const ReportOptions& opt) {
  if ((opt.format == "csv") != !opt.out_dir.empty()) {
    print_stderr("stepprof: {}\n", opt.format == "csv" ? "--format csv writes several files: give --out DIR"
                                                             : "--out DIR goes with --format csv; use -o FILE");
    return kUsage;
  }
  if (opt.format == "csv" && !opt.output.empty()) {
    print_stderr("stepprof: --format csv writes to --out DIR, not -o FILE\n");
    return kUsage;
  }
  if (opt.out_dir == "-") {  // (-o - is stdout; the CSV tables are several files)
    print_stderr("stepprof: --out - : the CSV tables are several files; give a directory\n");
    return kUsage;
  }
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (opt.format == "csv")
    for (const auto& name : csv_table_names()) input.more_outputs.push_back((std::filesystem::path(opt.out_dir) / name).string());
  if (auto stop = load_input(input, diag, in)) {
    // --format json: a document even when no record could be read, or --strict stopped,
    // saying why (a script that parses it got empty output after a strict stop).
    if ((*stop == kNoData || *stop == kInputErrors) && opt.format == "json" && !write_output(opt.output, render_json_unanalyzed(diag)))
      return output_failed();
    return *stop;
  }
  arm_exit_on_interrupt();  // (until the output is written)
  const AnalysisInput ain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const Report report = build_report(ain);
  if (opt.format == "csv") {
    const int status = finish(diag);
    return write_csv(opt.out_dir, report, ain) ? status : output_failed();
  }
  const int status = finish(diag);
  if (opt.format == "json") {  // (written as it is made: 65,536 ranks' report is 183 MB)
    const OutputPieces pieces = [&](const auto& write) { return render_json(report, diag, write); };
    if (!write_output_pieces(opt.output, pieces)) return output_failed();
  } else {
    const std::string text = opt.format == "markdown" ? render_markdown(report, diag) : render_text(report, diag);
    if (!write_output(opt.output, text)) return output_failed();
  }
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
  cmd->add_option("-o,--output", opt->output, "write the report to FILE instead of stdout")->check(kNonEmptyPath);
  cmd->add_option("--out", opt->out_dir,
                  "with --format csv: directory for updates.csv, regions.csv and summary.csv (created if missing)");
  cmd->callback([opt, set_action] { set_action([opt] { return run_report(*opt); }); });
}

}  // namespace stepprof::cli
