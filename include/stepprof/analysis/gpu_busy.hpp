// The GPU's busy and idle time per update, from `gpu_busy_ms` (schema::kGpuBusyMs), which
// `stepprof import kineto` writes from a profiler trace: the union over every device and
// stream of the GPU activity (kernels, copies, memsets) inside the update's wall time.
// Holistic Trace Analysis calls the rest "idle time" in its temporal breakdown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/stats.hpp"
#include "stepprof/record.hpp"

namespace stepprof {

struct GpuBusy {
  std::size_t updates = 0;        ///< updates in the window with gpu_busy_ms and wall_ms > 0
  std::size_t updates_total = 0;  ///< updates in the window
  std::size_t ranks = 0;          ///< ranks (logs) of those updates
  std::size_t ranks_total = 0;    ///< ranks (logs) in the window
  /// gpu_busy_ms per update, at most its wall_ms (a larger one, another unit, counts as
  /// busy throughout; the reader warns of it) [ms].
  Summary busy_ms;
  /// wall_ms - gpu_busy_ms per update, at least 0 [ms]: time in which no GPU activity ran.
  Summary idle_ms;
  Summary idle_fraction;  ///< idle_ms / wall_ms per update [fraction]
  /// With several ranks in the window: of those with the field, the rank with the largest
  /// median idle fraction, and that median.
  std::optional<std::int64_t> most_idle_rank;
  double most_idle_fraction = 0;
};

/// Which updates `g` covers, for the report's text: "3 updates", "8 update records of 8
/// ranks", "15 of the 20 update records, of 2 ranks (the others have no gpu_busy_ms or a
/// wall_ms of 0)".
std::string describe_gpu_busy_updates(const GpuBusy& g);

/// The update's `gpu_busy_ms` [ms], or nullopt when it has none (the reader has checked
/// that a kept one is a number from 0 to 1e12).
std::optional<double> logged_gpu_busy_ms(const UpdateRecord& u);

/// Over the window's updates that have `gpu_busy_ms` (every rank's, pooled); nullopt when
/// none has it (a step log from the recorder, which cannot see other streams' work).
std::optional<GpuBusy> analyze_gpu_busy(const AnalysisInput& in);

}  // namespace stepprof
