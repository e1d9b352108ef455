// Reads one input file into records, on its own: the per-file half of read_logs
// (log_reader.cpp does the cross-file half). Files are read this way in parallel and
// merged in input order, so the result and the diagnostics are the same as reading
// them one after another. Internal to the reader.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/diagnostics.hpp"
#include <array>

#include "stepprof/kineto.hpp"
#include "stepprof/names.hpp"
#include "stepprof/reader.hpp"
#include "stepprof/record.hpp"

namespace stepprof::detail {

/// What reading one file found. Region and counter ids in `updates` refer to the
/// file's own name tables, whose ids follow first appearance in the file.
/// The records after a config of another run than the file's first (an elastic job
/// restarted with another world size and appended): read as that run's, so that the
/// merge keeps the run most ranks have a config of whatever the files' layout.
struct RunSegment {
  std::optional<RunConfig> config;  ///< always set
  std::vector<UpdateRecord> updates;  ///< in line order (ids of the file's name tables)
};

struct FileResult {
  std::vector<Diagnostic> diags;       ///< in the order they arose, at most Diagnostics::kDefaultMaxKept per kind
  /// Problems beyond those, counted: [problem][severity].
  std::array<std::array<std::uint64_t, 3>, static_cast<int>(Problem::kCount_)> unkept{};
  std::vector<UpdateRecord> updates;   ///< accepted updates (rank resolved, window applied), in line order
  std::optional<RunConfig> config;     ///< the file's first config record, if any
  /// After a config of another run (not in strict mode): that config and its records,
  /// each differing config starting the next.
  std::vector<RunSegment> later_runs;
  std::size_t diags_before_config = 0;    ///< diags that arose before the config's rank was looked up
  std::size_t updates_before_config = 0;  ///< updates accepted before the config line
  std::uint64_t outside_window = 0;    ///< valid updates dropped by the --steps window
  std::uint64_t before_window = 0;     ///< ... of which were before its first step
  /// The lowest and highest step of those (meaningful when outside_window > 0).
  std::int64_t outside_first = 0, outside_last = 0;
  /// Update records skipped with an error (another rank's in this rank's file, after a
  /// concatenated log's config) [count]: a rank without records says why.
  std::uint64_t rejected_updates = 0;
  NameTable regions, counters;
  bool stopped = false;                ///< strict mode: reading stopped at the first problem
};

struct FileOptions {
  std::optional<StepRange> steps;
  bool strict = false;
  bool traces_only = false;  ///< read as a PyTorch profiler trace whatever the content
  KinetoOptions kineto;      ///< rank and world size for traces
  /// Strict mode: stop after this line, as if it had held a problem (used when the
  /// problem is found only when the file is merged with the others).
  std::uint64_t stop_after_line = 0;
  /// The rank the file's first config is read as when it names none, learned by a full
  /// read of the file (from its first update record after that config); strict mode's
  /// read up to the config line has no update record to learn it from.
  std::optional<std::int64_t> config_rank;
  const std::atomic<bool>* cancel = nullptr;  ///< polled per line
  /// Called every few thousand lines with the file's bytes consumed since the last call
  /// (compressed bytes for gzip input, to compare with the file's size).
  std::function<void(std::uint64_t)> on_bytes;
  bool keep_sample_indices = true;  ///< see ReadOptions::keep_sample_indices
};

/// Reads `path` (index `file` in the input list, `-` for stdin). Detects the format
/// from the content: JSON lines or the same pasted as a markdown table, or a PyTorch
/// profiler (Kineto) trace, any of them gzip-compressed. Never throws for bad input; every problem is a diagnostic.
FileResult read_file(const std::string& path, std::uint32_t file, const FileOptions& options);

/// The settings that identify a run (run_id, world_size, micro_batch, accumulation,
/// global_batch, seed, model): configs that differ in any of these are different runs.
std::string run_identity(const RunConfig& c);

/// A later config of the same run and rank in a file (equal run_id and rank: a process that
/// resumed the run, appending to its log) that does not state a run setting keeps the
/// run's: `later` takes the world size, micro-batch, accumulation, global batch, seed and
/// model it lacks from `run`. A setting it states with another value stays: that is
/// another run's (run_identity differs). Nothing when either lacks a run_id.
void inherit_run_settings(RunConfig& later, const RunConfig& run);
/// The run settings in which `a` and `b` differ, for messages: `run_id "b" against
/// absent, seed 1 against 2` (a's value first, text quoted; absent where one lacks it).
std::string identity_difference(const RunConfig& a, const RunConfig& b);
/// "rank 3" or "unknown rank", for messages.
std::string rank_text(const std::optional<std::int64_t>& r);

/// Update records that a resumed job ran again, left out for the later copies (the work
/// the restart lost), for the warning that says so: how many, their steps, lines and
/// update time [ms].
struct Superseded {
  std::size_t records = 0;
  std::int64_t first_step = 0, last_step = 0;
  std::uint64_t first_line = 0, last_line = 0;
  double wall_ms = 0;
  void add(const UpdateRecord& u);
  /// "step 4" or "steps 4..9".
  [[nodiscard]] std::string steps() const;
};

/// Copies an update with every vector sized exactly (no spare capacity), for keeping;
/// `sample_indices` only when `keep_sample_indices`.
UpdateRecord compact_copy(const UpdateRecord& u, bool keep_sample_indices = true);

}  // namespace stepprof::detail
