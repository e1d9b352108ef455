// Section 6 of the report: is this rank waiting for the others? From one rank's log.
//
// In data-parallel training every rank leaves the gradient all-reduce together, so a
// rank that finishes its compute early waits inside its communication region. The sign
// in one rank's log: time saved in a compute region reappears in the communication
// region, so the two are strongly anti-correlated over updates and their sum varies
// much less than either. The wait per update is then estimated as the communication
// time above its lowest value in the window (the update where this rank waited least
// is taken as "no wait"): a lower bound, since the rank may have waited even then.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/stats.hpp"

namespace stepprof {

/// This rank's wait split by whether an alternative code path (alt= in the nesting) ran in
/// the update: a rank that waits less when it ran the slow path, and more when it did
/// not, waits for other ranks' slow paths rather than for one slow rank.
struct PathWait {
  std::string region;                  ///< the path
  std::size_t updates_with = 0;        ///< updates (with the communication region) in which it ran
  std::size_t updates_without = 0;     ///< ... in which it did not
  double wait_with_ms = 0;             ///< median wait over the first [ms]
  double wait_without_ms = 0;          ///< median wait over the second [ms]
};

struct WaitingResult {
  /// The communication region: role=communication in the nesting, else the first region
  /// whose name contains "comm", "allreduce", "all_reduce", "nccl" or "reduce_scatter".
  std::optional<std::int64_t> rank;  ///< the rank analyzed
  std::string comm_region;
  std::string comm_found_by;  ///< "role in the nesting" or "region name"; empty: none found
  std::string compute_region;  ///< the region whose time the communication region absorbs
  std::optional<double> correlation;  ///< Pearson r(compute, comm) over updates
  /// Where `correlation` is unknown with a communication region found: why, for the
  /// report (e.g. "the communication region is in 2 updates: a correlation needs 3 or
  /// more"). It said "too few updates or no varying compute region" for a nesting whose
  /// roles left no region to compare with.
  std::string why_no_correlation;
  double compute_sd_ms = 0, comm_sd_ms = 0, sum_sd_ms = 0;  ///< sample standard deviations [ms]
  /// True when r <= -0.5 and the sum varies less than 0.6 x the smaller of the two:
  /// this rank's update time is set by another rank.
  bool waiting = false;
  double comm_floor_ms = 0;  ///< lowest comm time in the window, taken as "no wait" [ms]
  std::optional<Summary> wait_ms;  ///< comm - floor per update [ms]
  /// With `waiting` and the nesting: for each alternative path that ran in some of the
  /// updates but not all, the wait in each kind of update; in nesting order.
  std::vector<PathWait> path_waits;
  /// Updates in which the communication region took far longer than usual while this
  /// rank's own work (wall_ms minus it) stayed typical: it waited there for a rank slow
  /// in those updates only (or the collective itself was slow), which the
  /// anti-correlation above misses when its own compute hardly varies. Far longer:
  /// beyond the median by more than 3 robust standard deviations (1.4826 x MAD) and
  /// half the median, and by at least 5 % of the median update; typical: at most the
  /// median own work plus the larger of 3 robust standard deviations and 5 %. Filled when
  /// not `waiting`, also when no compute region is logged.
  std::vector<std::int64_t> spike_steps;
  double spike_threshold_ms = 0;        ///< communication time above which an update counts [ms]
  double spike_excess_ms = 0;           ///< median over them of the time beyond the median [ms]
  double spike_ms_per_update = 0;       ///< that excess summed, over all updates with the region [ms]
  std::size_t updates = 0;
  bool single_rank = true;  ///< false when several ranks' logs were given (see the cross-rank section)
  /// True when the rank's config says world size 1: there is no other rank to wait for,
  /// so `waiting` is false and there are no path waits, wait estimate or spikes (the
  /// correlation and spreads are still given).
  bool alone = false;
};

/// The region that holds collective communication: role=communication in the nesting
/// (of several such regions in the log, the one the most ranks list in their first 100
/// updates, the first in nesting order on a tie: a pipeline stage's sends and receives
/// exist on some ranks only), else the first region whose name contains "comm",
/// "allreduce", "all_reduce", "nccl", "reduce_scatter" or "all_gather", or is a
/// collective call's annotation (is_collective_call: "gloo:broadcast").
struct CommRegion {
  NameTable::Id id;
  std::string found_by;  ///< "role in the nesting" or "region name"
};
std::optional<CommRegion> find_comm_region(const AnalysisInput& in);

/// True for torch.distributed's annotation of one collective call: a name that starts with
/// "nccl:", "gloo:", "ucc:" or "mpi:" (ProcessGroupNCCL's `nccl:all_reduce`, as a PyTorch
/// profiler trace records it, with stepprof's " (in PARENT)" suffix or not). Its time is
/// communication, waiting for the peers included (NCCL's kernels spin until the peers are
/// ready; gloo and MPI block on the host): RankRegionTimes (lag regions) and the waiting
/// analysis's compute candidates never take it for work, whatever its role, and
/// find_comm_region's name rule takes it as a communication region.
bool is_collective_call(std::string_view name);

/// The analysis for one rank's updates.
WaitingResult analyze_waiting(const AnalysisInput& in, const RankLog& rank);
/// The same with the communication region found once for every rank (find_comm_region
/// reads every rank's first updates when several regions have the role).
WaitingResult analyze_waiting(const AnalysisInput& in, const RankLog& rank, const std::optional<CommRegion>& comm);

}  // namespace stepprof
