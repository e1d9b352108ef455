// `stepprof html`: the report with charts, as one self-contained HTML file.
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/report.hpp"
#include "stepprof/analysis/series.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "stepprof/render/exports.hpp"

namespace stepprof::cli {
namespace {

struct HtmlOptions {
  InputOptions input;
  std::string output;
  bool no_whatif = false;
};

int run_html(const HtmlOptions& opt) {
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (auto stop = load_input(input, diag, in)) return *stop;
  arm_exit_on_interrupt();  // (until the output is written)
  // One index for the report, the what-ifs and the charts (without it, the what-ifs and
  // charts looked every region up in every update record).
  const AnalysisInput plain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const UpdateIndex index(plain.updates(), in.data.regions.size(), in.data.counters.size());
  const AnalysisInput ain{in.data, plain.hierarchy, &index};
  const Report report = build_report(ain);
  std::vector<WhatIfResult> whatifs;
  if (!opt.no_whatif)
    for (Scenario sc : {Scenario::kBatchedGeometry, Scenario::kNoPadding, Scenario::kBalancedRanks}) {
      WhatIfOptions wo;
      wo.scenario = sc;
      whatifs.push_back(run_whatif(ain, wo));
    }
  const SeriesBuilder series(ain, report);
  const int status = finish(diag);
  // (Written as it is made, each charted rank's series built in turn: the page of 16 ranks
  // x 2,000 updates is 23 MB, and held whole, with every rank's series, it took 3x that.)
  if (!write_output_pieces(opt.output, [&](const std::function<bool(std::string_view)>& write) {
        return render_html(report, series, diag, whatifs, write);
      }))
    return output_failed();
  return status;
}

}  // namespace

void add_html_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<HtmlOptions>();
  CLI::App* cmd = app.add_subcommand(
      "html", "write the report with charts as one self-contained HTML file that opens offline in any browser");
  add_input_options(*cmd, opt->input);
  cmd->add_option("-o,--output", opt->output, "write the page to FILE (e.g. report.html) instead of stdout")->check(kNonEmptyPath);
  cmd->add_flag("--no-whatif", opt->no_whatif, "leave out the what-if section (stepprof whatif, docs/whatif.md)");
  cmd->callback([opt, set_action] { set_action([opt] { return run_html(*opt); }); });
}

}  // namespace stepprof::cli
