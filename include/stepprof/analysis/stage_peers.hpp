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

/// The config field that names each rank's pipeline stage, among the fields whose value
/// differs between ranks (RunSummary::config_differences): the first whose name, in lower
/// case, is `stage`, `stage_id`, `pp`, `pp_rank`, begins with `pp_` or `pipeline`, or ends in
/// `_stage` (Megatron-LM's pipeline-model-parallel rank, DeepSpeed's `stage_id`), with two
/// values or more. nullptr when none does.
const ConfigDifference* pipeline_stage_field(const std::vector<ConfigDifference>& classes);

/// Searches each stage of `field` that holds two or more of `ranks` (own work per aligned
/// update, `per_update`'s updates, as for find_straggler_episodes) for straggler stretches
/// (find_straggler_episodes among that stage's ranks: its median rank, its thresholds) and
/// for lags in scattered updates (find_recurring_lags, leaving out the stage's ranks whose
/// median own work is below `threshold` x that of the stage's fastest rank). What it finds
/// is added to out.episodes and out.recurring with `stage` set to the stage's value, in
/// place of what `out` held of the same rank there (an episode overlapping it, any
/// recurring lag: margins against the median rank of every stage), and out.stage_field,
/// out.stages_compared and out.stage_own_ms are set. Nothing is done
/// when the ranks hold fewer than two of the field's values (a rank without the field is
/// in no stage) or no stage holds two ranks.
void compare_within_stages(const ConfigDifference& field, const std::vector<RankWork>& ranks,
                           const std::vector<UpdateSlowest>& per_update, double threshold, CrossRankResult& out);

}  // namespace stepprof
