// Pipeline stages: each rank compared with the ranks of its own stage.
//
// In a pipeline-parallel job (Megatron-LM, DeepSpeed pipeline engine) the stages do
// different work: the first holds the embedding, the last the output layer and the loss,
// so their own work can be 2x the middle stages'. Compared with every rank, a rank of a
// light stage 1.3x slower than its stage peers stays below the median rank, and a rank of
// a heavy stage, slower than the median throughout, is taken for a straggler and is not
// searched for periodic lags (a checkpoint). The data-parallel all-reduce of a stage's
// gradients runs among that stage's ranks, so its ranks wait for the slowest of them:
// the cross-rank method (cross_rank.hpp) applies within a stage unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/run_summary.hpp"

namespace stepprof {

/// The fewest compared ranks a stage needs to be searched [count]: with two, the median
/// rank is their mean and one rank's noise is the other's lag (with 16 stages of 2 ranks,
/// 7 of 20 jobs of pure noise had a stretch or a lag).
inline constexpr std::size_t kMinStageRanks = 3;
/// The least margin, as a share of the stage's median own work, of a stretch or a lag
/// found within a stage: each stage is one more search, and a stage's bounds, from few
/// ranks, are tight (a 2.2 ms "stretch" at 3 % noise).
inline constexpr double kMinStageLag = 0.10;
/// The fewest updates behind of a stretch found within a stage [count]: 3 of 5 came by
/// chance (random slow updates of one rank, on 32 ranks in 8 stages, 2 of 20 jobs of
/// noise), and 6 of 7 from one rank's heavy-tailed noise (3 of 15 jobs): a stage's bounds
/// come from its peers' spread.
inline constexpr std::size_t kMinStageBehind = 10;
/// A rank slower than its stage's peers throughout is this factor or more above their
/// median in at least 3/4 of the compared steps.
inline constexpr double kStageAhead = 1.05;

/// The config field that names each rank's pipeline stage, among the fields whose value
/// differs between ranks (RunSummary::config_differences), with two values or more:
/// `stage` if it is one, else the first whose name, in lower case, ends in `_stage` or
/// `stage_id`, or begins with `pp_` or `pipeline` and ends in `rank` or `_id`
/// (Megatron-LM's pipeline-model-parallel rank, DeepSpeed's `stage_id`), and holds none of
/// `size`, `degree`, `world`, `zero`, `num`, `count` (DeepSpeed's `zero_stage` is no
/// pipeline stage). nullptr when none does.
const ConfigDifference* pipeline_stage_field(const std::vector<ConfigDifference>& classes);

/// Searches each stage of `field` that holds kMinStageRanks or more of `ranks` (own work
/// per aligned update, `per_update`'s updates, as for find_straggler_episodes) for
/// straggler stretches (find_straggler_episodes among that stage's ranks: its median rank,
/// its thresholds) and for lags in scattered updates (find_recurring_lags, leaving out the
/// stage's ranks whose median own work is below `threshold` x that of the stage's fastest
/// rank), keeping those whose margin is at least kMinStageLag of the stage's median own
/// work (and stretches with kMinStageBehind updates behind). They are priced as the job waits, for the slowest rank of every stage: a
/// stretch's `excess_ms` sums over its updates, and a lag's `stake_ms` (and `at_stake_ms`)
/// over its behind steps, the rank's own work beyond every other rank's (0 where a
/// heavier stage sets the pace). A stretch is added to out.episodes with `stage` set to
/// the stage's value, in place of out.episodes' stretches of the rank that overlap it
/// (margins against the median rank of every stage), unless it covers under half of the
/// steps of one of them where out.stragglers and out.slow_group do not hold every rank of
/// its stage (then that one stays and it is dropped); a lag is
/// added to out.recurring where that has none of the rank's. out.stage_field,
/// out.stages_compared and out.stage_own_ms are set.
/// out.stage_slow gets the ranks slower than their stage's other ranks throughout: median
/// own work at least 1 + kMinStageLag times the median of the others' medians, and at
/// least kStageAhead times the others' median in 3/4 of the updates or more (a slow node
/// holds a rank of every stage; against every rank it hid among the heavier stages); not
/// a rank out.stragglers or out.slow_group holds, unless they hold every rank of some
/// stage (they then name stages for their work, and this rank among them). Their stretches over half the
/// updates or more are left out (this says it), and out.stage_slow_at_stake_ms is what
/// the job gains per update with each at its stage's other ranks' median (the mean over
/// the updates of the slowest own work less the slowest then). Nothing is done when the ranks hold
/// fewer than two of the field's values (a rank without the field is in no stage) or no
/// stage holds kMinStageRanks ranks.
void compare_within_stages(const ConfigDifference& field, const std::vector<RankWork>& ranks,
                           const std::vector<UpdateSlowest>& per_update, double threshold, CrossRankResult& out);

}  // namespace stepprof
