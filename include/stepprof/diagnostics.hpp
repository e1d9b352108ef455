// Problems found in the input, with where they are and what was expected.
// Readers report into a Diagnostics sink and keep going (or stop, in strict mode);
// nothing they reject is dropped without a diagnostic.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stepprof {

enum class Severity : std::uint8_t {
  kNote,     ///< information (e.g. a file skipped because of its name)
  kWarning,  ///< analyzed anyway; exit status stays 0 (e.g. a truncated final line)
  kError,    ///< some input was rejected; exit status 1 at the end
};

/// What kind of problem; each has its own message text and stable name (code_name()).
enum class Problem : std::uint8_t {
  kMalformedJson,    ///< the line is not valid JSON
  kTruncatedLine,    ///< the final line ends mid-record (a job killed mid-write)
  kBadField,         ///< a field has the wrong type or shape
  kMissingField,     ///< a required field (type, step, wall_ms) is missing
  kNonFinite,        ///< NaN or Infinity where a number is required
  kNegativeTime,     ///< a time or count below zero
  kDuplicateStep,    ///< a second update record for the same rank and step
  kMissingConfig,    ///< a rank's records come without a config record
  kMixedRuns,        ///< records of different runs or ranks in one file or input set
  kUnknownRecord,    ///< a record whose `type` is unknown
  kEmptyInput,       ///< no update records at all
  kUnreadable,       ///< a file could not be opened or decompressed
  kHierarchy,        ///< a problem in a --hierarchy file or the nesting it describes
  kRecorderErrors,   ///< the recorder itself counted errors while writing the log
  kBadTrace,         ///< a profiler trace that cannot be used (not a trace, truncated, no rank or steps)
  kUnattributed,     ///< trace activity that belongs to no update (outside every ProfilerStep)
  kZeroBytes,        ///< a run of NUL bytes in a log (a crash or power loss zero-fills what was being written)
  kJoinedRecords,    ///< two or more records on one line (a lost newline); each is read
  kOneOffNames,      ///< many region or counter names that occur in one step each (names made with the step in them)
  kZeroWallTime,     ///< updates with wall_ms 0 whose regions took time
  kSeveralRanks,     ///< one file holds several ranks' logs (a log shipper's stream); each record is its rank's
  kLinePrefix,       ///< records after a prefix on their line (torchrun's [rank3]:, srun --label, a log collector's timestamp)
  kOtherOutput,      ///< lines that hold no record (a job's stdout: prints, progress bars, library messages)
  kRegionBeyondUpdate,  ///< region times far above their update's wall_ms (a unit error or a corrupt value)
  kStepsBackwards,      ///< an update record whose step is below the one before it in its file (no config between)
  kNewerSchema,         ///< a config record's `schema` version is newer than this reader's (schema::kVersion)
  kWallTimeOutlier,     ///< an update's wall_ms far above its rank's median (a clock that jumped, a unit error)
  kZeroRegionTimes,     ///< a rank whose every region time is 0 while its updates took time
  kOptimizerNotEveryUpdate,  ///< the optimizer region ran in every k-th update only: updates are micro-batches?
  kCount_,
};

/// Stable lowercase name of a problem kind, e.g. "malformed-json" (used in JSON output).
std::string_view code_name(Problem p);
std::string_view severity_name(Severity s);

/// One problem. line and column are 1-based; 0 means "whole file" / "whole line".
struct Diagnostic {
  Severity severity = Severity::kError;
  Problem problem = Problem::kMalformedJson;
  std::string file;
  std::uint64_t line = 0;
  std::uint64_t column = 0;
  std::string message;
};

/// `text` with control characters (control_bytes()) written as \xNN per byte, so
/// printing a log cannot drive the terminal or reorder what it shows. Used by
/// format_diagnostic and the text renderers.
std::string printable(std::string_view text);

/// The length [bytes] of the control character that starts at text[i], 0 when none:
/// ASCII's (bytes < 0x20 and 0x7f, e.g. a terminal escape in a region name read from a
/// log), C1 controls (U+0080..U+009F; U+009B is a terminal's CSI), the line and
/// paragraph separators U+2028 and U+2029, and the bidirectional embeddings, overrides
/// and isolates U+202A..U+202E and U+2066..U+2069, which reorder text on screen
/// ("Trojan Source", CVE-2021-42574); and 1 for a byte that is no part of valid UTF-8
/// (a file name's bytes in another encoding: 0x9B is an 8-bit terminal's CSI).
std::size_t control_bytes(std::string_view text, std::size_t i);

/// `file:line:column: severity: message [code]`, the form compilers use; control
/// characters from the input are shown as \xNN.
std::string format_diagnostic(const Diagnostic& d);

/// Collects diagnostics. Keeps at most `max_kept` of each kind (Problem), so that a
/// problem of another kind reported last (such as "nothing to analyze") is kept however
/// many came before; all are counted. In strict mode the first warning or error asks the
/// reader to stop.
class Diagnostics {
 public:
  static constexpr std::size_t kDefaultMaxKept = 10000;
  explicit Diagnostics(bool strict = false, std::size_t max_kept = kDefaultMaxKept)
      : strict_(strict), max_kept_(max_kept) {}

  void report(Diagnostic d);
  /// Counts `n` problems that a reader did not keep (it already kept max_kept of their
  /// kind), as report() would count them.
  void count_unkept(Severity s, Problem p, std::uint64_t n);
  /// True once strict mode has seen a warning or an error: readers stop reading.
  [[nodiscard]] bool should_stop() const { return stopped_; }
  [[nodiscard]] bool strict() const { return strict_; }

  [[nodiscard]] const std::vector<Diagnostic>& kept() const { return kept_; }
  [[nodiscard]] std::uint64_t count(Severity s) const { return by_severity_[static_cast<int>(s)]; }
  [[nodiscard]] std::uint64_t count(Problem p) const { return by_problem_[static_cast<int>(p)]; }
  [[nodiscard]] std::uint64_t count(Problem p, Severity s) const {
    return by_both_[static_cast<int>(p)][static_cast<int>(s)];
  }
  [[nodiscard]] std::uint64_t total() const;

 private:
  bool strict_;
  bool stopped_ = false;
  std::size_t max_kept_;
  std::vector<Diagnostic> kept_;
  std::array<std::uint64_t, 3> by_severity_{};
  std::array<std::uint64_t, static_cast<int>(Problem::kCount_)> by_problem_{};
  std::array<std::array<std::uint64_t, 3>, static_cast<int>(Problem::kCount_)> by_both_{};
};

}  // namespace stepprof
