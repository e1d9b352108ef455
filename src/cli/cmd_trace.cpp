// `stepprof trace`: the logs as a Chrome trace for the Perfetto UI and chrome://tracing.
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "stepprof/analysis/timeline.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/render/exports.hpp"
#include "../util/rank_numbers.hpp"

namespace stepprof::cli {
namespace {

struct TraceOptions {
  InputOptions input;
  std::string output;
  std::string ranks;  ///< --ranks LIST: draw only these ranks
};

int run_trace(const TraceOptions& opt) {
  std::vector<RankRange> only;
  if (!opt.ranks.empty()) {
    std::string err;
    const auto list = parse_rank_list(opt.ranks, err);
    if (!list) {
      print_stderr("stepprof: --ranks: {}\n", err);
      return kUsage;
    }
    only = *list;
  }
  Diagnostics diag(opt.input.strict);
  LoadedInput in;
  InputOptions input = opt.input;
  input.output = opt.output;
  if (auto stop = load_input(input, diag, in)) return *stop;
  arm_exit_on_interrupt();  // (until the output is written)
  const AnalysisInput ain{in.data, in.hierarchy ? &*in.hierarchy : nullptr};
  const Timeline timeline = build_timeline(ain, only);
  if (timeline.span_too_long_ms) {
    finish(diag);
    print_stderr("stepprof: the updates' wall_ms add up to {:.3g} ms ({:.3g} years), more than a trace's time axis "
                 "holds (2^53 us, 285 years): are they in another unit, or corrupt? Nothing was written (--steps "
                 "A:B draws fewer updates)\n",
                 *timeline.span_too_long_ms, *timeline.span_too_long_ms / 3.15576e10);
    return kNoData;  // (nothing drawn, as for --ranks that match no rank)
  }
  if (!only.empty() && timeline.processes.empty()) {
    std::vector<std::int64_t> ranks;
    for (const auto& r : in.data.ranks)
      if (r.rank) ranks.push_back(*r.rank);
    finish(diag);
    print_stderr("stepprof: --ranks {}: no rank of the logs is in it (the logs' ranks: {}); nothing to draw\n",
               opt.ranks, ranks.empty() ? std::string("none named") : detail::rank_numbers(ranks));
    return kNoData;
  }
  if (!timeline.timestamps_not_used.empty())  // (the trace's otherData.layout says it too)
    print_stderr("stepprof: note: start_unix_ms not used, updates laid out one after another: {}\n",
               timeline.timestamps_not_used);
  const int status = finish(diag);
  // Written as it is made: a trace of thousands of ranks is gigabytes (held whole, and
  // twice while the text grew, it took 2.9x its size in memory).
  std::size_t bytes = 0;
  const bool written = write_output_pieces(opt.output, [&](const std::function<bool(std::string_view)>& write) {
    return render_trace(timeline, [&](std::string_view piece) {
      bytes += piece.size();
      return write(piece);
    });
  });
  if (!written) return output_failed();
  // (A trace of a thousand ranks' full logs is hundreds of MB: say so, and how to cut it.)
  constexpr std::size_t kLargeTrace = std::size_t{256} << 20;
  if (bytes > kLargeTrace)
    print_stderr(
               "stepprof: the trace is {:.0f} MB: the Perfetto UI loads it slowly and chrome://tracing may not open "
               "it; --steps A:B writes fewer updates, --ranks LIST fewer ranks\n",
               static_cast<double>(bytes) / 1e6);
  return status;
}

}  // namespace

void add_trace_command(CLI::App& app, std::function<void(std::function<int()>)> set_action) {
  auto opt = std::make_shared<TraceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "trace", "write the updates and regions as a Chrome trace (JSON) for the Perfetto UI or chrome://tracing");
  add_input_options(*cmd, opt->input);
  cmd->add_option("-o,--output", opt->output, "write the trace to FILE (e.g. trace.json) instead of stdout")->check(kNonEmptyPath);
  cmd->add_option("--ranks", opt->ranks,
                  "draw only these ranks: ranks and ranges A:B, comma-separated (e.g. 0:7,4095); the updates keep the "
                  "places every rank's times give them")
      ->check(CLI::Validator(
          [](const std::string& s) { return s.empty() ? std::string("an empty list: give ranks, e.g. 0:7,12") : std::string(); },
          "LIST"));
  cmd->callback([opt, set_action] { set_action([opt] { return run_trace(*opt); }); });
}

}  // namespace stepprof::cli
