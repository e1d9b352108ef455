// The slowest updates of the window and the regions that grew in them: what "update time
// varies" is made of.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/input.hpp"

namespace stepprof {

/// A region's median time in the slow updates against all updates [ms].
struct RegionGrowth {
  std::string region;
  double slow_ms = 0;     ///< median over the slow updates (absent: 0)
  double typical_ms = 0;  ///< median over every update (absent: 0)
  [[nodiscard]] double grew_ms() const { return slow_ms - typical_ms; }
};

/// The slowest updates: beyond the median update time by more than 3 robust standard
/// deviations (1.4826 x the median absolute deviation) and 10 % of the median, or, when
/// none is that far out, above the 90th percentile. An update here is a step: with
/// several ranks, its time is the step's longest update (what the job took). Where the
/// ranks are compared by own work (cross_rank.hpp: wall time less the communication
/// region), the regions are those of the rank with the most own work in each step (the
/// rank the others waited for: the longest update is often a waiting rank's, whose
/// communication region holds the wait); elsewhere those of the longest update.
struct SlowUpdates {
  double threshold_ms = 0;          ///< slow means above this update time [ms]
  std::vector<std::int64_t> steps;  ///< the slow steps, in step order
  std::vector<double> steps_ms;     ///< their update times (a step's longest update), as `steps` [ms]
  double slow_ms = 0;               ///< median update time of the slow steps [ms]
  double typical_ms = 0;            ///< median update time of every step [ms]
  /// What the slow steps take beyond the median, summed, per step of the window [ms per
  /// update]: what making them typical would save on average.
  double excess_ms_per_update = 0;
  /// The regions that take longest more in the slow updates, most first (at most 3, each
  /// growing by at least a tenth of slow_ms - typical_ms): the first is the region that grew most, followed down the
  /// nesting while a child accounts for at least half of its parent's growth (the deepest
  /// such region says where the time went); then the next largest.
  std::vector<RegionGrowth> grew;
  /// How many entries of `grew` are the first chain (the last of them is the deepest).
  std::size_t first_chain = 0;
  /// True when `grew` compares, per step, the regions of the rank with the most own work
  /// (see above); false when those of the step's longest update.
  bool by_own_work = false;
  /// With by_own_work: the rank with the most own work in the most slow steps, and in how
  /// many of them [count].
  std::optional<std::int64_t> set_by_rank;
  std::size_t set_by_steps = 0;
  /// With by_own_work: every rank that had the most own work in some slow step, and in how
  /// many (rank, count), ascending rank.
  std::vector<std::pair<std::int64_t, std::size_t>> setters;
  /// Where the ranks were compared by own work: the median over the slow steps of the
  /// most own work of any rank, and of the median rank's, each minus its median over
  /// every compared step [ms] (0 otherwise).
  double most_own_work_grew_ms = 0;
  double median_own_work_grew_ms = 0;
  /// The same of the median of the ranks other than each step's slowest
  /// (UpdateSlowest::others_median_compute_ms) [ms]: when it grew by at least half as much
  /// as the most own work, every rank's own work grew. (By the median rank's, one of 2
  /// ranks 20 ms slower made "every rank's own work grew: the median rank's by 10 ms",
  /// a helper.)
  double others_own_work_grew_ms = 0;
  /// True when the most own work in the slow steps is within its usual range (the
  /// median plus the larger of 3 robust standard deviations and 5 %), and the median
  /// rank's within its own (where every rank's own work grew, the most own work can stay
  /// in a band that one rank's frequent slow path widens), and the most own work grew by
  /// less than half the slow steps' extra update time (median, against every step's):
  /// no rank given made
  /// them slow, every rank waited (for a rank without a log, one that stopped, or a slow
  /// collective); `grew` then compares the longest updates (by_own_work is false).
  bool own_work_typical = false;
  /// With own_work_typical: a rank left out of the comparison (CrossRankResult::ranks_short:
  /// a log that starts late or holds under half the steps) whose own work (wall_ms less
  /// the communication region) grew in the slow steps it holds, the one the compared ranks
  /// waited for. Named where it holds at least half of the slow steps (and 2 or more), and
  /// its margin over the compared ranks' median own work there (median) exceeds its margin
  /// in the other steps it holds (median; 0 without any) by more than the larger of 3
  /// robust standard deviations of those margins and 5 % of its median own work, and by at
  /// least half of the slow steps' extra update time; of several, the one that grew most. A late-starting rank
  /// slow in steps 22..28 was "every rank waited: something outside the ranks given".
  struct LeftOutRank {
    std::int64_t rank = -1;
    std::size_t slow_steps_held = 0;  ///< slow steps its log holds [count]
    double grew_ms = 0;               ///< its median own work there less its median [ms]
  };
  std::optional<LeftOutRank> left_out_rank;
  /// Slow steps with a cause of their own that the medians of `grew` hide: per slow step,
  /// the region that grew most against its median over every step (then down the nesting
  /// while a child holds half of that), where it accounts for at least half of the step's
  /// time beyond typical_ms. A region that is so in 2 or more slow steps and a tenth of
  /// them, and is not in `grew` nor above or below a region there, is listed (the most
  /// steps first, at most 2). A data-loader stall every 10th step among 13 slow steps that
  /// ran a slow path was put down to the slow path.
  struct OtherCause {
    std::string region;
    std::vector<std::int64_t> steps;  ///< ascending
    double grew_ms = 0;               ///< its median growth over those steps [ms]
  };
  std::vector<OtherCause> other_causes;
};

/// Nullopt with fewer than 10 steps or no slow update. The region time is
/// device time where the log has it for the region, else host time (as the region table).
/// `cross`: the cross-rank comparison of the same input (null, or not available: the
/// longest update's regions are compared).
std::optional<SlowUpdates> analyze_slow_updates(const AnalysisInput& in, const CrossRankResult* cross = nullptr);

}  // namespace stepprof
