// Section 2 of the report: update time and throughput.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "stepprof/analysis/gpu_busy.hpp"
#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/run_summary.hpp"
#include "stepprof/analysis/stats.hpp"

namespace stepprof {

/// A rate in units per second, per rank and for the whole job.
struct Rate {
  std::optional<double> per_rank_per_s;  ///< mean over the ranks present of sum(count) / sum(wall_ms) x 1000
  std::optional<double> job_per_s;       ///< whole job
  bool job_estimated = false;            ///< true: per-rank rate x world_size (not every rank's log was given)
};

struct UpdateTimeResult {
  /// Update time per step [ms]: the rank's wall_ms, or with several ranks the
  /// largest wall_ms over ranks for that step (the job waits for its slowest rank).
  std::optional<Summary> update_ms;
  /// The step of the longest update (the first such step when several tie); with
  /// update_ms.
  std::optional<std::int64_t> slowest_step;
  /// The longest update time of the other steps [ms]: how far the slowest stands out
  /// (unset with fewer than two steps).
  std::optional<double> next_slowest_ms;
  std::vector<std::pair<std::int64_t, Summary>> per_rank_ms;  ///< wall_ms per rank (several ranks only; rank -1: the log names no rank)
  Rate samples;       ///< samples/s (`samples` counter, else micro_batch x accumulation per update)
  Rate token_slots;   ///< token slots/s (`token_slots`: batch x padded length)
  Rate valid_tokens;  ///< non-padding tokens/s (`valid_tokens`)
  Rate frames;        ///< frames/s (`frames`)
  /// Job samples/s from the config: global_batch x updates / sum of update times.
  std::optional<double> global_samples_per_s;
  /// The `samples` counter's median per update and rank, when it is not the config's
  /// micro_batch x accumulation (`samples_per_update_config`), e.g. a count made once per
  /// update where there are two micro-batches: the per-rank rate and the job rate from the
  /// global batch then disagree, and one of the two is wrong [samples].
  std::optional<double> samples_per_update_counted;
  std::optional<double> samples_per_update_config;
  /// The GPU's busy and idle time per update, where the updates have `gpu_busy_ms` (a
  /// profiler trace's; gpu_busy.hpp).
  std::optional<GpuBusy> gpu_busy;
};

UpdateTimeResult analyze_update_time(const AnalysisInput& in, const RunSummary& run);

}  // namespace stepprof
