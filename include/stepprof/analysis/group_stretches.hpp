#pragma once
// Ranks that slow down together for a few updates: a node throttled or shared with another
// job, a switch or link degraded for a while. Each of them may be too little behind the
// median rank, or too briefly, to be a straggler or a straggler stretch (they may be half
// the ranks of a pipeline's slower stages, whose lag is by design), but together they set
// the step.
//
// The candidates are the sets of ranks that share a config value (ConfigDifference: a
// `node_rank`, a `hostname`, a `stage`): without that, sets of ranks that are behind in the
// same updates by chance (independent fallbacks, say) would be found too.
//
// Method, per candidate set C (two or more ranks, at most half of those compared):
//   a rank is up in an update when its own work is at least kGroupFactor x its own median
//   (so a stage heavier by design is measured against itself);
//   an update is C's when at least 3/4 of C's ranks are up and at most 1/4 of the others;
//   a stretch is a run of kGroupMinUpdates or more consecutive such updates, shorter than
//   half of the aligned updates (longer is a slow group: CrossRankResult::slow_group),
//   and beyond chance: with C's updates a share q of all, runs of its length L come by
//   chance about (aligned updates) x q^L times, and that times the number of candidate
//   sets must be below kGroupChance (a Bonferroni bound over the sets; two ranks of a
//   tensor-parallel pair share their jitter and are often up together for 3 updates).
// A stretch whose ranks are a subset of another stretch's in overlapping updates is left
// out (a node's stretch also makes its stage's ranks up). Sets with the same ranks (a
// `node_rank` and a `hostname`) are one stretch, named by the first field.

#include <cstdint>
#include <string>
#include <vector>

#include "stepprof/analysis/run_summary.hpp"

namespace stepprof {

struct RankWork;
struct UpdateSlowest;

inline constexpr double kGroupFactor = 1.15;          ///< own work over the rank's median, to be up
inline constexpr std::size_t kGroupMinUpdates = 3;    ///< consecutive updates, at least
inline constexpr double kGroupChance = 0.01;          ///< expected runs by chance over all sets, below

struct GroupStretch {
  std::vector<std::int64_t> ranks;  ///< ascending
  std::string key, value;           ///< the config field and value (JSON text) the ranks alone share
  std::int64_t first_step = 0, last_step = 0;
  std::size_t updates = 0;          ///< aligned updates from first_step to last_step [count]
  /// Median over the stretch's updates and the set's ranks of own work / the rank's median
  /// own work; `others_factor` the same for the other ranks.
  double factor = 1, others_factor = 1;
  /// Mean over the stretch's updates of how much sooner the slowest rank would have
  /// finished its own work with the set's ranks' own work divided by `factor` [ms].
  double excess_ms = 0;
  /// excess_ms x updates / all aligned updates: its share of every update [ms per update].
  double at_stake_ms = 0;
};

/// The stretches of `ranks` (own work per aligned update, as find_slow_group takes) over
/// `per_update` (the aligned steps), for the sets `classes` names (values absent from a
/// rank's config are not sets). Ordered by first step, then rank; at most 1,000 (the
/// largest at_stake_ms) before subsets are left out.
std::vector<GroupStretch> find_group_stretches(const std::vector<RankWork>& ranks,
                                               const std::vector<UpdateSlowest>& per_update,
                                               const std::vector<ConfigDifference>& classes);

}  // namespace stepprof
