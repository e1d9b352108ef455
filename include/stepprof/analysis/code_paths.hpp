// Section 4 of the report: alternative code paths for the same work (such as
// `vggt_batched` vs the per-sample fallback `vggt_single`): what each costs per unit of
// work, how often each ran, and what in the data goes with the slow one.
// Needs the nesting (alternatives are marked there); without it the result says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/input.hpp"

namespace stepprof {

struct PathCost {
  std::string region;
  bool device = true;          ///< costs use device time (else host time)
  std::size_t updates = 0;     ///< updates in which the path ran
  double total_ms = 0;         ///< summed over the window [ms]
  double calls = 0;            ///< summed calls [count]
  std::optional<double> samples, frames, microbatches;  ///< summed work [count]; absent if the log lacks it
  std::string samples_counter, frames_counter, microbatches_counter;  ///< counter names used
  std::optional<double> ms_per_sample, ms_per_frame, ms_per_microbatch;  ///< total_ms / work [ms per unit]
  /// The work is counted from the per-micro-batch detail (the recorder's microbatch():
  /// the micro-batches that name this path), not from counters: set when the log has none
  /// of the path's three counters and in every update that ran the path some micro-batch
  /// names it. Frames then only when every such micro-batch lists them.
  bool work_from_microbatches = false;
  bool microbatch_frames = false;  ///< with work_from_microbatches: every micro-batch of the path lists its frames
  /// The work is the update's own `samples` and `frames` counters (samples_id, frames_id
  /// are then theirs), in the updates where no other path of the group ran (`others`), and
  /// unknown where one did: set when the log has none of the path's three counters and no
  /// micro-batch detail naming it in every update that ran it. Every sample of such an
  /// update is taken to have gone through this path (a text-only sample that skipped the
  /// group would add a sample, not a frame: ms_per_frame holds, ms_per_sample is low).
  bool work_from_update = false;
  std::vector<NameTable::Id> others;  ///< the group's other paths' regions (with work_from_update)
  std::optional<NameTable::Id> region_id;                             ///< the path's region in the dataset
  std::optional<NameTable::Id> samples_id, frames_id, microbatches_id;  ///< the counters, when the log has them
};

/// A unit of a path's work.
enum class PathWork : std::uint8_t { kSamples, kFrames, kMicrobatches };

/// Path `p`'s work of kind `what` in update `u` [count]: its counter's value (nullopt when
/// the update lacks it), or with `p.work_from_microbatches` the sum over the update's
/// micro-batches that took the path (samples, frames, or 1 each), or with
/// `p.work_from_update` the update's counter where no other path of the group ran
/// (nullopt where one did); nullopt when the log has no such work for the path.
std::optional<double> path_work(const PathCost& p, PathWork what, const UpdateRecord& u);

/// How often one frame count occurs in updates that ran the slow path and in the others.
struct FrameCountEvidence {
  std::int64_t frames = 0;             ///< frames per sample
  std::size_t updates_with = 0;        ///< updates with at least one sample of this frame count
  std::size_t updates_with_slow = 0;   ///< ... of which ran the slow path
  std::int64_t samples = 0;            ///< samples with this frame count over the window
};

/// An update that ran the slow path, and what that cost beyond the same work on the fast path.
struct SlowPathUpdate {
  std::optional<std::int64_t> rank;
  std::int64_t step = 0;
  double slow_ms = 0;    ///< the slow path's time in the update [ms]
  double excess_ms = 0;  ///< slow_ms minus its work at the fast path's unit cost [ms], > 0
};

/// The first `n` of `updates` in words: "rank 6 step 200 (+1964.2 ms), step 50 (+12.0 ms)"
/// (the rank when the update has one; the excess over the fast path's cost, 1 decimal).
std::string slow_updates_text(const std::vector<SlowPathUpdate>& updates, std::size_t n);

struct PathGroup {
  std::string group;   ///< the alternatives' group name (alt=...)
  std::string parent;  ///< common parent region the log has (AnalysisInput::parent_in_log), if any
  std::vector<PathCost> paths;
  /// Fastest and slowest path by ms per frame (else per sample); empty if not comparable
  /// or when they cost within 10 % of each other (then `similar_cost` is set).
  std::string fast, slow;
  std::optional<double> slow_over_fast;  ///< ratio of the per-frame (else per-sample) costs
  bool similar_cost = false;             ///< the paths cost within 10 % per unit: no slow path
  std::string unit = "frame";            ///< "frame" or "sample": what the ratio is per
  std::size_t updates = 0, updates_with_slow = 0, updates_fast_only = 0;
  /// Updates whose samples have more than one distinct frame count, among the updates
  /// that ran the slow path / that ran only the fast path.
  std::size_t slow_updates_mixed_frames = 0, fast_only_updates_mixed_frames = 0;
  std::vector<FrameCountEvidence> frame_counts;  ///< by frame count, ascending
  /// Frame counts present only in updates that ran the slow path.
  std::vector<std::int64_t> frame_counts_only_with_slow;
  /// The same evidence per micro-batch, from the per-micro-batch detail (microbatch()),
  /// where micro-batches that list their samples' frames took the slow path and others the
  /// fast one. With gradient accumulation an update holds several micro-batches, so per
  /// update it says little: uniform micro-batches of different frame counts make every
  /// update "mixed", whether or not mixing is what selects the slow path.
  struct MicroBatchMixing {
    std::size_t slow = 0, fast = 0;              ///< micro-batches that took the slow / fast path [count]
    std::size_t slow_mixed = 0, fast_mixed = 0;  ///< ... whose samples have several distinct frame counts
    /// Frame counts found only in micro-batches that took the slow path (among those of
    /// the group's paths that list frames), ascending.
    std::vector<std::int64_t> frame_counts_only_with_slow;
  };
  std::optional<MicroBatchMixing> microbatch_mixing;  ///< unset without such detail for both paths
  /// From micro-batch detail that names each micro-batch's path and gives its length (its
  /// padded_length, else its longest sample's tokens) [tokens]: the lengths of the
  /// micro-batches that took the slow path and the fast one. `apart` when no length is
  /// in both ranges: a length limit chooses the path (a kernel with a maximum sequence
  /// length, say). Unset without such detail for both paths.
  struct LengthSplit {
    std::size_t slow = 0, fast = 0;  ///< micro-batches with a length [count]
    std::int64_t slow_min = 0, slow_max = 0, fast_min = 0, fast_max = 0;  ///< [tokens]
    bool apart = false;
  };
  std::optional<LengthSplit> length_split;
  /// With a slow path: some update of the window gives samples' frame counts (a frame
  /// histogram, or micro-batch detail with frames), whether or not they tell the paths apart.
  bool frames_logged = false;
  /// Mean over updates of the slow path's time minus the same work at the fast path's
  /// unit cost [ms per update]: what moving all its work to the fast path would save on
  /// this rank's compute (before any waiting for other ranks absorbs it).
  std::optional<double> saving_ms_per_update;
  /// Mean over the window's steps of the largest excess (slow path's time minus the same
  /// work at the fast path's unit cost, as in `costliest`) of the ranks that ran it in that
  /// step, taken as 0 where it is below 0 (the slow path was cheaper there) or no rank ran
  /// it [ms per optimizer update]. A step waits for its slowest rank, so this is what the
  /// step would save when the rank that ran the slow path is the one it waits for: an
  /// upper bound for the job. With one rank's log it is saving_ms_per_update but for the
  /// steps where the excess is below 0; with N ranks' logs and one rank per step running
  /// it, saving_ms_per_update is about 1/N of it.
  std::optional<double> step_saving_at_most_ms;
  /// The updates in which the slow path cost most beyond the fast path's cost for the same
  /// work (largest excess_ms first, then in update order; at most kCostliestKept; only
  /// updates with a positive excess): where the fallbacks happened, with their rank.
  std::vector<SlowPathUpdate> costliest;
  static constexpr std::size_t kCostliestKept = 5;
};

struct CodePathResult {
  bool nesting_known = false;    ///< false: no nesting given, so no alternatives known
  std::vector<PathGroup> groups;
  /// By update, in AnalysisInput::updates() order: the time its paths took beyond what
  /// each group's fast path would take for the same work [ms] (see path_excess_ms); empty
  /// when no group has a slow path.
  std::vector<double> update_excess_ms;
};

CodePathResult analyze_code_paths(const AnalysisInput& in);

/// The time of the k-th of the analysis input's updates() that its paths took beyond what
/// each group's fast path would take for the same work [ms]: over the groups with a slow
/// path (`fast` and `slow` set), the sum over each path p costlier per unit than the fast
/// one of its time t_p x (1 - c_fast / c_p), with c the paths' costs per unit (per frame,
/// else per sample, as the group's `unit`). 0 for an update that ran only fast paths.
/// The cross-rank comparison subtracts it from a rank's own work to tell a slow rank from
/// a rank that fell back (analyze_cross_rank).
/// (`paths.update_excess_ms[k]`, 0 where that is empty.)
double path_excess_ms(const CodePathResult& paths, std::size_t k);

/// "every micro-batch of 121 tokens or more took S (121..128, 289 micro-batches), every one
/// of 120 or fewer took F (73..120, 351)" for a group whose length_split is `apart`, with
/// the micro-batch counts when `counts`; "" otherwise. The report's section and the
/// slow-path finding say it.
std::string length_split_text(const PathGroup& g, bool counts);
/// The length from which the slow path is taken, and "more" or "fewer" (apart only).
std::pair<std::int64_t, const char*> length_limit(const PathGroup::LengthSplit& l);

}  // namespace stepprof
