// What would a change buy? `stepprof whatif`: replays every update with its work changed
// by a scenario, prices the change with the cost models (cost_model.hpp), and puts the
// ranks' synchronization back in (docs/whatif.md has every formula).
//
// Scenarios
//  - batched-geometry: every micro-batch takes the cheaper code path of an alternative
//    group (e.g. vggt_batched instead of the per-sample fallback vggt_single), variant
//    "pad" (frames padded up to the micro-batch's largest frame count) or "group"
//    (samples grouped by frame count, as a length-bucketing sampler does).
//  - no-padding: token slots equal valid tokens.
//  - balanced-ranks (several ranks' logs): every rank does the mean work of the update at
//    the median rank's speed.
//
// Prediction. For update u of rank r, the change of its compute is
//     D(r, u) = sum over leaf regions R with a usable model of  t_R(x'(u)) - t_R(x(u)),
// x the update's work features, x' the scenario's. With every rank's log the update time
// of step k becomes
//     U'(k) = max_r (c(r, k) + D(r, k)) + (U(k) - max_r c(r, k)),
// c = wall_ms minus the communication region (the rank's own work), U = the largest
// wall_ms of the step. From one rank's log of a multi-rank job, a range:
//     every rank improves alike:  U'(k) = U(k) + D(k)
//     only this rank improves:    U'(k) = U(k) + max(0, D(k) - w(k))
// with w(k) this rank's wait (communication time above its lowest value, waiting.hpp).
// Intervals: percentile bootstrap over updates (models refitted on each resample).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/cost_model.hpp"
#include "stepprof/analysis/input.hpp"

namespace stepprof {

enum class Scenario : std::uint8_t { kBatchedGeometry, kNoPadding, kBalancedRanks };

/// "batched-geometry", "no-padding", "balanced-ranks".
std::string_view scenario_name(Scenario s);
std::optional<Scenario> parse_scenario(std::string_view name);

struct WhatIfOptions {
  Scenario scenario = Scenario::kBatchedGeometry;
  /// batched-geometry: "pad" or "group"; empty: both.
  std::string variant;
  /// batched-geometry: the alternative group (alt= in the nesting); empty: the first
  /// group with two or more paths.
  std::string group;
  /// batched-geometry: the path every micro-batch takes; empty: the group's cheapest per
  /// frame (code_paths.hpp `fast`).
  std::string path;
  std::size_t bootstrap = 200;  ///< bootstrap replicates for the intervals (0: none)
  std::size_t draws = 16;       ///< random draws per update where the scenario's composition is random
  double interval = 0.9;        ///< central probability of the intervals
  std::uint64_t seed = 20240607;
  CostModelOptions models;
};

/// The fewest steps a bootstrap interval of central probability `central` (0 < central < 1)
/// may rest on; fewer and a prediction rests on too few steps: a note says so, and the text
/// does not call its bootstrap range an interval of that probability. The bootstrap
/// resamples steps; of n steps, the interval from the k-th smallest to the k-th largest
/// covers their distribution's median with probability 1 - 2 P(Binomial(n, 1/2) <= k - 1),
/// whatever the distribution (the sign test's order-statistic interval). The bound is the
/// smallest n whose interval short of the whole range (k = 2) reaches `central`:
/// 1 - 2 (n + 1) / 2^n >= central. For 90 %: 8 steps (7 steps: 87.5 %; 8: 93.0 %); for
/// 95 %: 9 (96.1 %). Below 5 steps not even the whole range reaches 90 % (1 - 2^(1-n): 50 %
/// for 2 steps, 75 % for 3). Central probabilities past 1 - 2 * 63 / 2^62 give 62.
constexpr std::size_t few_steps_bound(double central) {
  std::size_t n = 3;
  double tail = 1.0;  // 2 (n + 1) / 2^n for n = 3
  while (n < 62 && 1.0 - tail < central) {
    tail = tail * static_cast<double>(n + 2) / (2.0 * static_cast<double>(n + 1));
    ++n;
  }
  return n;
}

/// The bound for the default 90 % intervals.
inline constexpr std::size_t kFewSteps = few_steps_bound(0.9);
static_assert(kFewSteps == 8 && few_steps_bound(0.95) == 9 && few_steps_bound(0.5) == 5);

/// A median over updates with its bootstrap interval [ms].
struct Interval {
  double median_ms = 0;
  double low_ms = 0;
  double high_ms = 0;
};

/// How one leaf region changes, averaged over updates (all ranks).
struct RegionChange {
  std::string region;
  double measured_ms = 0;  ///< mean measured time per update [ms]
  double change_ms = 0;    ///< mean predicted change per update [ms] (0 when neither modeled nor removed)
  bool modeled = false;    ///< a usable model priced the change
  /// The region no longer runs in the scenario (another path of the group, without a
  /// usable model): change_ms is minus its measured mean time, no model involved.
  bool removed = false;
  std::string note;        ///< why not, when its work changes but its model is not usable
};

struct UpdatePrediction {
  std::int64_t step = 0;
  double measured_ms = 0;                   ///< U(k) [ms]
  double predicted_ms = 0;                  ///< U'(k), every rank improves alike / all ranks [ms]
  std::optional<double> only_this_rank_ms;  ///< one rank's log of a multi-rank job [ms]
};

/// balanced-ranks: what each rank does and how fast.
struct RankBalance {
  std::int64_t rank = -1;
  double compute_ms = 0;     ///< median own work time per update (wall_ms - communication) [ms]
  double work_share = 0;     ///< its median work / the mean over ranks of that [fraction]
  double relative_time = 0;  ///< its time per unit of work / the median rank's [ratio]; > 1: slower
};

struct Prediction {
  std::string variant;  ///< "pad", "group", or "" for scenarios without variants
  std::string summary;  ///< one sentence: what changes
  bool available = false;
  std::string why_not;
  bool range = false;   ///< one rank's log of a multi-rank job: only_this_rank is set
  Interval measured;    ///< measured update time [ms]
  Interval predicted;   ///< predicted (every rank improves alike, when a range) [ms]
  std::optional<Interval> only_this_rank;
  double saved_ms = 0;  ///< measured.median - predicted.median, per update [ms]
  /// Mean over the updates of measured - predicted (every rank alike, when a range) [ms]:
  /// x 1000 the time 1,000 such updates save. Differs from saved_ms when the saving
  /// varies between updates (the difference of two medians is not a median saving).
  double saved_mean_ms = 0;
  std::optional<double> saved_only_ms;
  std::optional<double> saved_only_mean_ms;  ///< as saved_mean_ms, for only_this_rank [ms]
  std::optional<double> samples_per_update;  ///< samples per update of the job [count]
  std::vector<RegionChange> regions;  ///< leaf regions whose work changes
  std::vector<RankBalance> ranks;     ///< balanced-ranks only
  std::vector<UpdatePrediction> updates;
  std::vector<std::string> assumptions;
  std::vector<std::string> notes;     ///< what is weak about this prediction
};

struct WhatIfResult {
  Scenario scenario = Scenario::kBatchedGeometry;
  CostModelSet models;
  bool microbatch_detail = false;  ///< every update has per-micro-batch detail
  std::string detail;              ///< where the micro-batch composition comes from, in words
  std::string sync;                ///< how the ranks' synchronization enters, in words
  std::size_t ranks = 0, updates = 0;
  /// Steps the medians and the bootstrap are over: the updates of one rank's log, the
  /// steps every rank's log has with several (fewer than few_steps_bound(interval): a note says so).
  std::size_t steps = 0;
  std::size_t bootstrap = 0;
  double interval = 0.9;
  std::vector<Prediction> predictions;
};

/// Runs one scenario (all its variants unless options.variant names one).
WhatIfResult run_whatif(const AnalysisInput& in, const WhatIfOptions& options);

/// The replay behind batched-geometry and no-padding, for one variant: prepared once
/// from the input and the fitted models, then replayed (bench/bench_whatif.cpp).
class WhatIfReplay {
 public:
  WhatIfReplay(const AnalysisInput& in, const CostModelSet& models, const WhatIfOptions& options,
               std::string variant);
  ~WhatIfReplay();
  WhatIfReplay(const WhatIfReplay&) = delete;
  WhatIfReplay& operator=(const WhatIfReplay&) = delete;

  [[nodiscard]] bool available() const;
  [[nodiscard]] const std::string& why_not() const;
  /// Replays every update once (draw `seed` where the composition is random) with the
  /// models' coefficients: the predicted change of each update's compute [ms], in
  /// AnalysisInput::updates() order. `features_sum` (optional; one vector per update,
  /// FeatureSpace order) gets the update's work features after the change added to it.
  /// Returns the number of samples replayed.
  std::size_t replay(std::uint64_t seed, std::vector<double>& change_ms,
                     std::vector<std::vector<double>>* features_sum = nullptr) const;

  struct Impl;  ///< internal (src/analysis/whatif.cpp)
  [[nodiscard]] const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepprof
