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
// child regions do not hold (its own code, outside any child region). A region that holds
// a waiting region is measured without it; background regions are left out.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/input.hpp"

namespace stepprof {

inline constexpr double kLagShare = 0.1;  ///< of the rank's lag, for a top-level region to be followed

/// A region in which a rank spends more time than the other ranks (RankRegionTimes::lag_of).
struct RegionLag {
  std::string region;
  double rank_ms = 0;    ///< the rank's median time in the region per update, waits inside it left out [ms]
  double others_ms = 0;  ///< median over the other ranks of their medians [ms]
  /// Of rank_ms - others_ms, the part its child regions do not hold [ms]; 0 for a leaf.
  double outside_children_ms = 0;
  bool leaf = true;  ///< no child region of work with times in the nesting
};

/// Where a rank's extra own work is.
struct RankLag {
  std::vector<RegionLag> regions;  ///< largest difference first
  /// Slower in proportion: the regions that hold 80 % of the other ranks' time (self
  /// times, largest first), two or more of them, each have an excess over the other
  /// ranks' (their ratio less 1) within half of `ratio` - 1 either way; `ratio` is the
  /// rank's summed self time over the other ranks' (a GPU or host slower at everything,
  /// not one region).
  bool proportional = false;
  double ratio = 0;
};

/// Each rank's median time per update in each region of work (see the file comment),
/// computed once (one pass over every region's times of every update: regions x updates),
/// so that lag_of() for many ranks costs regions x ranks each.
class RankRegionTimes {
 public:
  /// `updates` is in.updates(); `comm_region` the communication region ("" for none).
  /// Holds nothing without the nesting (in.hierarchy).
  RankRegionTimes(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                  std::string_view comm_region);
  /// Where `rank`'s extra own work is: the regions (at most `max`), from each region
  /// without a parent of work that holds at least kLagShare of `lag_ms` (the rank's own-work
  /// lag behind the other ranks [ms]), followed down the nesting while one child holds
  /// half of its parent's difference; and whether it is slower in proportion. Empty
  /// without the nesting, other ranks or a lag.
  [[nodiscard]] RankLag lag_of(std::int64_t rank, double lag_ms, std::size_t max = 3) const;

 private:
  std::optional<std::size_t> place_of(std::int64_t rank) const;
  double others(const std::vector<double>& per_rank, std::size_t self) const;
  const Hierarchy* h_ = nullptr;
  std::vector<std::int64_t> ranks_;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;  // each rank's updates in updates()
  std::vector<bool> work_;                                    // per hierarchy node
  // Per hierarchy node: its children of work (through regions the log never has), and
  // whether it is one.
  std::vector<std::vector<std::size_t>> work_children_;
  std::vector<bool> under_work_;
  // Per hierarchy node, per rank (as ranks_): median inclusive time without the waits
  // inside it, and median self time (without its work children either) [ms].
  std::vector<std::vector<double>> inclusive_, self_;
};

}  // namespace stepprof
