#pragma once
// Where one rank's own work goes beyond the other ranks': the regions a straggler spends
// its extra time in, so that its finding can say "forward, outside its child regions"
// instead of "find what differs on rank 2".
//
// Method: a region's time per update is its device time where the log has one for it,
// else its host time, and 0 in an update without it (a path not taken). For each region
// of the nesting that is not communication (nor inside the communication region, nor
// background work), each rank's median over its updates is compared with the median over
// the other ranks of theirs. From each top-level region that holds at least kLagShare of
// the rank's lag, the nesting is followed down while one child holds at least half of its
// parent's difference; the region reached is named, with the part of its difference its
// child regions do not hold (its own code, outside any child region).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/input.hpp"

namespace stepprof {

inline constexpr double kLagShare = 0.1;  ///< of the rank's lag, for a top-level region to be followed

/// A region in which a rank spends more time than the other ranks (where_rank_lags).
struct RegionLag {
  std::string region;
  double rank_ms = 0;    ///< the rank's median time in the region per update [ms]
  double others_ms = 0;  ///< median over the other ranks of their medians [ms]
  /// Of rank_ms - others_ms, the part its child regions do not hold [ms]; 0 for a leaf.
  double outside_children_ms = 0;
  bool leaf = true;  ///< no child region in the nesting
};

/// The regions where rank `rank` spends more time per update than the other ranks of
/// `in.data` (see the file comment), largest difference first, at most `max`; `lag_ms` is
/// the rank's own-work lag behind the other ranks [ms], the scale for kLagShare. Empty
/// without the nesting (in.hierarchy), without other ranks, or where no region holds
/// that share. `updates` is in.updates(); `comm_region` the communication region ("" for
/// none). Costs one pass over every region's times of every update (regions x updates).
std::vector<RegionLag> where_rank_lags(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                                       std::int64_t rank, std::string_view comm_region, double lag_ms,
                                       std::size_t max = 3);

}  // namespace stepprof
