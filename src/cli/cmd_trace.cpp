// `stepprof trace`: the logs as a Chrome trace for the Perfetto UI and chrome://tracing.
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/timeline.hpp"
#include "stepprof/render/exports.hpp"

namespace stepprof::cli {
namespace {

struct TraceOptions {
  InputOptions input;
  std::string output;
};

int run_trace(const TraceOptions& opt) {
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (auto stop = load_input(input, diag, in)) return *stop;
  arm_exit_on_interrupt();  // (until the output is written)
  const AnalysisInput ain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const Timeline timeline = build_timeline(ain);
  const std::string text = render_trace(timeline);
  if (!timeline.timestamps_not_used.empty())  // (the trace's otherData.layout says it too)
    fmt::print(stderr, "stepprof: note: start_unix_ms not used, updates laid out one after another: {}\n",
               timeline.timestamps_not_used);
  const int status = finish(diag);
  if (!write_output(opt.output, text)) return output_failed();
  // (A trace of a thousand ranks' full logs is hundreds of MB: say so, and how to cut it.)
  constexpr std::size_t kLargeTrace = std::size_t{256} << 20;
  if (text.size() > kLargeTrace)
    fmt::print(stderr,
               "stepprof: the trace is {:.0f} MB: the Perfetto UI loads it slowly and chrome://tracing may not open "
               "it; --steps A:B writes fewer updates\n",
               static_cast<double>(text.size()) / 1e6);
  return status;
}

}  // namespace

void add_trace_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "trace", "write the updates and regions as a Chrome trace (JSON) for the Perfetto UI or chrome://tracing");
  add_input_options(*cmd, opt->input);
  cmd->add_option("-o,--output", opt->output, "write the trace to FILE (e.g. trace.json) instead of stdout")->check(kNonEmptyPath);
  cmd->callback([opt, set_action] { set_action([opt] { return run_trace(*opt); }); });
}

}  // namespace stepprof::cli
