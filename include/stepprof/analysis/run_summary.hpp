// Section 1 of the report: which run, which ranks, which window, which settings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/input.hpp"

namespace stepprof {

/// A config field whose value is not the same on every rank (e.g. a data-loader setting
/// changed on one node, a pipeline stage).
struct ConfigDifference {
  std::string key;
  /// Each value as written (JSON text; "" where a rank's config lacks the field) and the
  /// ranks that have it, ascending; values in the order of their lowest rank.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> values;
};

/// The config's planned end of the run, which no rank's log reached.
struct StoppedEarly {
  std::string field;   ///< `last_step` (the window the recorder was set to record) or `max_steps`
  std::int64_t value = 0;
};

struct RunSummary {
  std::vector<std::int64_t> ranks;               ///< ranks with records, ascending
  std::vector<std::int64_t> missing_ranks;       ///< 0..world_size-1 without records (world size known)
  /// Update records whose log names no rank (no `rank` field, no config); they may be
  /// some of missing_ranks' [count].
  std::size_t updates_without_rank = 0;
  std::optional<std::int64_t> world_size;        ///< number of ranks in the job
  std::optional<std::int64_t> micro_batch;       ///< samples per micro-batch per rank
  std::optional<std::int64_t> accumulation;      ///< micro-batches per update (gradient accumulation)
  std::optional<std::int64_t> global_batch;      ///< samples per update over all ranks
  bool global_batch_derived = false;             ///< true: micro_batch x accumulation x data_parallel (else world_size)
  /// The data-parallel size (ranks that each take their own micro-batches), where the
  /// config says it: `data_parallel_size`, `data_parallel`, `dp_size` or `dp_degree`, or
  /// world_size divided by the product of the tensor, pipeline and context-parallel sizes
  /// it gives (`tensor_parallel_size`, `tensor_model_parallel_size`, `tp_size`,
  /// `pipeline_parallel_size`, `pipeline_model_parallel_size`, `pp_size`,
  /// `context_parallel_size`, `cp_size`, ... ; Megatron-LM's and DeepSpeed's names) when
  /// it divides. With it, global_batch = micro_batch x accumulation x data_parallel: a
  /// pipeline of 4 stages x 3 replicas had been told its global batch 48 was not
  /// 2 x 8 x 12.
  std::optional<std::int64_t> data_parallel;
  std::string data_parallel_from;  ///< how data_parallel was found, e.g. "world_size 12 / pipeline_parallel_size 4"
  /// Why the config's sizes were not used: a data-parallel size that does not divide
  /// world_size or whose product with the model-parallel sizes is not world_size, sizes
  /// that do not divide it, a size above 2^20 (a positive integer each; others are not read).
  std::optional<std::string> data_parallel_problem;
  std::optional<std::string> global_batch_mismatch;  ///< config's global_batch disagrees with the product
  std::size_t updates = 0;                       ///< update records analyzed, all ranks
  std::vector<std::pair<std::int64_t, std::size_t>> updates_per_rank;  ///< (rank, update records); rank -1: the log names no rank
  std::optional<std::int64_t> first_step, last_step;  ///< the analyzed window (inclusive)
  /// Steps of first_step..last_step that a rank's log has no update record of, summed over
  /// the ranks (a rank's first or last steps too) [count]: lost records, a job that logs
  /// only some updates, or a rank that started late or stopped early. Saturates at
  /// 2^64 - 1 (steps near 2^63 on several ranks).
  std::uint64_t steps_without_record = 0;
  /// The steps' stride: the greatest common divisor of every step's distance from
  /// first_step, when the window holds 3 or more distinct steps and it is above 1 (a job
  /// that logs every k-th update); else 1. steps_without_record counts the steps of that
  /// stride only.
  std::int64_t step_stride = 1;
  std::uint64_t updates_outside_window = 0;     ///< dropped by --steps
  std::uint64_t updates_before_window = 0;      ///< ... of which were before its first step
  std::uint64_t updates_of_other_runs = 0;      ///< skipped as another run's (Dataset::updates_of_other_runs)
  /// Set when every rank's log ends before the config (the lowest rank's) says the run
  /// would: its `last_step` is at least one stride beyond last_step, or else its
  /// `max_steps` is more than one stride beyond it (steps counted from 0 or from 1), and
  /// --steps left no record out. A crash, a kill or a time limit that stopped every rank
  /// alike, which a comparison of the ranks cannot see.
  std::optional<StoppedEarly> stopped_early;
  /// Steps, ascending, in which some rank's update record is the first after a config
  /// record in its file, other than the window's first step, with those ranks (ascending;
  /// -1 for a log that names no rank):
  /// the recorder opened again there (a job resumed from a checkpoint, appending or into a
  /// new file; a rank that started late), so that update's wall time counts from open() and
  /// holds the restart (start-up, checkpoint loading, warm-up), as step 1's does.
  std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> reopened_at;
  std::vector<RawField> config;                 ///< config fields of the lowest rank, verbatim
  /// Config fields (other than `rank`) that differ between the ranks' configs, in the
  /// order of their first appearance.
  std::vector<ConfigDifference> config_differences;
  std::vector<std::string> files;
  std::string nesting_source;                   ///< empty when the nesting is unknown
};

RunSummary summarize_run(const AnalysisInput& in);

}  // namespace stepprof
