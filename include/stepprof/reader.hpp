// Reads step logs into a Dataset: newline-delimited JSON (the real log's format), the
// same pasted as a markdown table (`| {json} |` rows), gzip-compressed files, whole
// directories and stdin (`-`). Every problem is reported to a Diagnostics sink with
// file, line and column (docs/log-schema.md lists them); rejected records are never
// dropped silently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/dataset.hpp"
#include "stepprof/diagnostics.hpp"
#include "stepprof/kineto.hpp"

namespace stepprof {

/// An inclusive window of optimizer updates (`--steps A:B`).
struct StepRange {
  std::int64_t first = std::numeric_limits<std::int64_t>::min();
  std::int64_t last = std::numeric_limits<std::int64_t>::max();
  [[nodiscard]] bool contains(std::int64_t step) const { return step >= first && step <= last; }
};

/// Parses "A:B" (inclusive), "A:", ":B" or "A" (one update). On bad text returns
/// nullopt and sets `error` to what was wrong.
std::optional<StepRange> parse_step_range(std::string_view text, std::string& error);

/// `range` as --steps takes it: "A:B", "A:", ":B" or "A" (one update).
std::string step_range_text(const StepRange& range);

/// An inclusive range of ranks (the same bounds as a StepRange).
using RankRange = StepRange;

/// Parses a list of ranks: items "A:B" (inclusive), "A:", ":B" or "A", comma-separated
/// (e.g. "0:7,4095"). On bad text returns nullopt and sets `error` to what was wrong.
std::optional<std::vector<RankRange>> parse_rank_list(std::string_view text, std::string& error);

struct ReadOptions {
  std::optional<StepRange> steps;  ///< keep only updates in this window
  /// Read every input as a PyTorch profiler trace (`stepprof import kineto`). Otherwise
  /// files whose content is a trace (is_kineto_trace) are read as traces, the rest as step logs.
  bool traces_only = false;
  KinetoOptions kineto;  ///< rank and world size for traces (see KinetoOptions)
  /// Files read at once (each file by one thread; results are merged in input order,
  /// so they do not depend on this). 0: one per hardware thread, at most one per file.
  unsigned threads = 0;
  /// Polled while reading (about every 4096 lines); once it is true, read_logs stops
  /// and returns an incomplete Dataset, which the caller should discard.
  const std::atomic<bool>* cancel = nullptr;
  /// Called on the calling thread about every 200 ms while reading, with the input
  /// bytes consumed so far and the total input size [bytes] (compressed bytes for gzip
  /// files; total 0 when unknown, e.g. stdin).
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
  /// Keep each update's `sample_indices` (false: they are still validated, but
  /// UpdateRecord::sample_indices stays empty). No analysis reads them; the analysis
  /// commands leave them out to save about 8 bytes per index (144 bytes per update of
  /// the real log), `stepprof import` keeps them to write them out again.
  bool keep_sample_indices = true;
  /// Which run to keep when the inputs hold several (docs/log-schema.md, "Runs").
  enum class Run : std::uint8_t {
    kMostRanks,  ///< the run most ranks have a config of (on a tie, the lowest rank's)
    kLatest,     ///< the run whose update records reach the highest step (after a restart)
  };
  Run run = Run::kMostRanks;
};

/// The files `inputs` names: files as given, directories expanded to the log files in
/// them (sorted; names ending .jsonl, .ndjson, .json or .log, optionally followed by .gz,
/// that are not plainly something else: docs/log-schema.md "Inputs stepprof reads"; what is left out is
/// reported as notes), "-" for stdin. A file found twice is listed once.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, Diagnostics& diag);

/// For a tool about to write logs into `dir` (`synth`, `import kineto`): the log files
/// that `stepprof report DIR` would read there (expand_inputs) other than `files` (paths
/// it will write, as `dir / name`), relative to `dir` and sorted; empty when `dir` is not
/// a directory. Such files would be read as part of the new job.
std::vector<std::string> logs_besides(const std::string& dir, const std::vector<std::string>& files);

/// Reads and validates every record of `inputs` (after expand_inputs).
/// Per-line problems are reported and the line skipped; a last line without a newline
/// that does not parse is reported as truncated (a warning). Then, across files:
/// duplicate steps, mixed runs, ranks without a config and empty input. In strict mode
/// reading stops at the first warning or error (diag.should_stop()).
Dataset read_logs(const std::vector<std::string>& inputs, const ReadOptions& options,
                  Diagnostics& diag);

}  // namespace stepprof
