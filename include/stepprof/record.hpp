// The log model: what one config record and one update record hold, in memory.
// Field meanings and units follow docs/log-schema.md (the real log's schema).
// "Absent" is represented explicitly (std::optional or a missing element), never as 0:
// a region or counter that did not occur in an update is not in that update's vectors.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepprof/compact_optional.hpp"
#include "stepprof/names.hpp"

namespace stepprof {

/// Where a record came from: index into the input file list and 1-based line number.
struct SourceLocation {
  std::uint32_t file = 0;
  /// An update record's: it is the first update record after a config record in its file
  /// (the recorder opened there, as at a process's start or a resumed job's: its wall time
  /// counts from open()). (Held here, in the struct's padding: no record grows by it.)
  bool after_config = false;
  /// With after_config: that config record is the first of its rank's in the file (the
  /// recorder's first open in this file, not a resume appended to it).
  bool after_first_config = false;
  std::uint64_t line = 0;
};

/// A JSON field kept verbatim: key and its raw JSON text (e.g. `"0"`, `42`, `{"a":1}`).
struct RawField {
  std::string key;
  std::string json;
};

/// The config record: run-level settings. Every field of the record is kept in
/// `fields`, in file order, including ones stepprof does not know; the typed members
/// are the ones the analyses use, parsed from those fields when present.
struct RunConfig {
  std::vector<RawField> fields;           ///< all fields except `type`, verbatim
  std::optional<std::int64_t> rank;        ///< data-parallel rank of the process
  std::optional<std::int64_t> world_size;  ///< number of ranks
  std::optional<std::int64_t> micro_batch;   ///< samples per micro-batch on one rank
  std::optional<std::int64_t> accumulation;  ///< micro-batches per optimizer update
  std::optional<std::int64_t> global_batch;  ///< samples per update over all ranks
  std::optional<std::int64_t> seed;
  std::optional<std::int64_t> first_step;  ///< first recorded update
  std::optional<std::int64_t> last_step;   ///< last recorded update
  std::optional<std::int64_t> max_steps;   ///< optimizer updates the run was set to make
  std::optional<std::int64_t> schema;      ///< schema version (absent: 1)
  std::optional<std::string> model;
  std::optional<std::string> run_id;       ///< written by stepprof's recorder
  std::optional<std::string> clock;        ///< host clock the recorder used
  std::optional<std::string> device_timing;  ///< device-timing status from the recorder
  SourceLocation source;

  /// The raw JSON of field `key`, or nullptr.
  [[nodiscard]] const RawField* find(std::string_view key) const;
};

/// The largest world size read from a config (2^20 ranks): a larger one is reported and
/// not used, since the report lists every rank a job lacks.
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 20;

/// The deepest nesting of arrays and objects a config field's value may have.
inline constexpr std::size_t kMaxConfigDepth = 64;

/// Builds a RunConfig from its fields (raw JSON values), filling the typed members. A
/// field whose value is not valid JSON (`NaN`, `Infinity`) or is nested deeper than
/// kMaxConfigDepth is left out and described in `problems`.
/// A known field of the wrong type (e.g. `"world_size": "4"`) is left unset in the
/// typed members, kept in `fields`, and described in `problems` (one message each). A
/// negative rank or a rank not below world_size is kept as written and described in
/// `problems` too; a world_size below 1 or above kMaxWorldSize is described and not used.
RunConfig make_config(std::vector<RawField> fields, std::vector<std::string>* problems = nullptr);

/// Checks the raw JSON of a config's `region_roles` or `region_alternatives` field: it
/// must be an object whose values are strings, and for `region_roles` each one of
/// schema::kRegionRoleNames. Returns every problem, each naming its region and joined by
/// "; " (e.g. `region "a" has the unknown role "x" (known: ...)`), or an empty string
/// when there is none; the caller names the field.
std::string check_region_map(std::string_view key, std::string_view json);

/// The JSON text `json` in one canonical form, for comparing values written by different
/// writers: parsed and written back compactly, object keys sorted (nlohmann::json), so
/// that `{"a": 1, "b": 2}` and `{"b":2,"a":1}` compare equal. Text that does not parse,
/// or holds a number a double cannot tell apart from its neighbours (2^53 or more written
/// as a float or beyond 64-bit integers), is returned unchanged.
std::string canonical_json(std::string_view json);

/// The value of `json`, the text of one JSON number, as a double; a number too small for
/// a double (`1e-999`) is 0 (or the nearest subnormal), as simdjson reads one in the
/// schema's numeric fields. nullopt for text that is not a number as std::from_chars
/// reads it, or beyond a double (`1e999`).
std::optional<double> json_number_value(std::string_view json);

/// A key given twice within one object of the JSON text `json`, at any depth, compared as
/// decoded (`"a"` and `"\u0061"` are one key): e.g. `{"x": {"a": 1, "a": 2}}` -> "a" (of
/// several, the one the innermost object to close first gives). nullopt when every
/// object's keys differ, or when the text is not JSON (checked elsewhere). Checked by the
/// same grammar pass as the reader's fields of the job's own (src/log/json_grammar.hpp);
/// a reader that keeps the last value (nlohmann, Python's json) would otherwise drop the
/// first without a word.
std::optional<std::string> repeated_json_key(std::string_view json);

/// Splits the text of one JSON object into fields (key, raw JSON value text), in order,
/// e.g. `{"micro_batch": 8, "model": "m"}` -> {("micro_batch", "8"), ("model", "\"m\"")}.
/// Returns false, with `error` describing the problem, when the text is not one JSON
/// object, repeats a key or holds a value nested more than kMaxConfigDepth levels deep.
/// Used by the recorder for the user's config fields.
bool parse_object_fields(std::string_view json_object, std::vector<RawField>& out, std::string& error);

/// Sentinel parent id: the region is top-level (its parent is the update itself).
inline constexpr NameTable::Id kTopLevel = 0xFFFFFFFFu;

/// An optional time [ms]: absent is NaN (the reader admits only finite times).
using OptionalMs = CompactOptional<double, AbsentNaN>;
/// An optional count: absent is INT64_MIN (counts are >= 0).
using OptionalCount = CompactOptional<std::int64_t, AbsentMarker<std::int64_t, std::numeric_limits<std::int64_t>::min()>>;
/// An optional region id or kTopLevel: absent is 0xFFFFFFFE (no name table gets that large).
using OptionalRegionId = CompactOptional<NameTable::Id, AbsentMarker<NameTable::Id, 0xFFFFFFFEu>>;

/// One region in one update. Times are summed over the region's calls in the update.
/// 32 bytes: the members work like std::optional but are stored in their values' width
/// (compact_optional.hpp).
struct RegionSample {
  NameTable::Id region = 0;  ///< id in the dataset's region NameTable
  OptionalRegionId parent;   ///< `parents`: parent region id or kTopLevel; absent if the log does not say
  OptionalMs device_ms;      ///< `cuda_stream_ms`: device-stream time [ms]
  OptionalMs host_ms;        ///< `cpu_call_ms`: host time between entry and exit [ms]
  OptionalCount calls;       ///< `calls`: entries in this update [count]
};
static_assert(sizeof(RegionSample) == 32);

/// One per-update counter (`counts`): a count of work items, e.g. samples or frames.
struct Counter {
  NameTable::Id name = 0;  ///< id in the dataset's counter NameTable
  double value = 0;        ///< [count]; integral for every counter the analyses use
};

/// One entry of `input_shapes`: the shape of a micro-batch's token tensor and how
/// many micro-batches of the update had it.
struct InputShape {
  std::vector<std::int64_t> dims;  ///< e.g. {batch, padded_length}
  std::int64_t microbatches = 0;   ///< [count]
};

/// One micro-batch of the update's optional per-micro-batch detail (`microbatches`):
/// what each of its samples held and which code path it took. Per-sample vectors are in
/// sample order; when both are present they have one entry per sample.
struct MicroBatch {
  std::optional<NameTable::Id> path;  ///< code-path region taken (dataset's region NameTable); absent if not said
  std::vector<std::int64_t> frames;   ///< frames of each sample [count]; empty if not recorded
  std::vector<std::int64_t> tokens;   ///< valid (non-padding) tokens of each sample [count]; empty if not recorded
  /// Token length the micro-batch was padded to [tokens]; absent: the longest sample's tokens.
  std::optional<std::int64_t> padded_length;

  /// Samples in the micro-batch: the length of `frames`, else of `tokens`.
  [[nodiscard]] std::size_t samples() const { return frames.empty() ? tokens.size() : frames.size(); }
};

/// One update record (one optimizer update of one rank).
struct UpdateRecord {
  std::optional<std::int64_t> rank;  ///< from the record, else from its file's config
  std::int64_t step = 0;             ///< optimizer update index
  double wall_ms = 0;                ///< host wall-clock time of the whole update [ms]
  std::vector<RegionSample> regions;  ///< in file order; absent regions are not listed
  std::vector<Counter> counters;      ///< in file order; absent counters are not listed
  /// `frame_histogram`: (frames per sample, samples with that many frames), file order.
  std::vector<std::pair<std::int64_t, std::int64_t>> frame_histogram;
  std::vector<InputShape> input_shapes;
  std::vector<std::int64_t> sample_indices;  ///< dataset indices of the update's samples, in order
  std::optional<double> padding_fraction;    ///< 1 - valid_tokens / token_slots [fraction]
  /// `microbatches`: optional per-micro-batch detail, in micro-batch order; empty when the
  /// log has none (older logs, the real log).
  std::vector<MicroBatch> microbatches;
  /// `recorder_errors`: errors the recorder counted since its previous record, by kind
  /// (e.g. {"write_failed", 3}) [count]. Empty when the log has none.
  std::vector<std::pair<std::string, std::int64_t>> recorder_errors;
  std::vector<RawField> extra;  ///< fields stepprof does not know, verbatim
  SourceLocation source;

  /// The region sample for `id`, or nullptr when the region is absent in this update. A
  /// record lists a region at most once (the reader rejects one that lists it twice); of a
  /// record built otherwise that does, either entry may be returned.
  [[nodiscard]] const RegionSample* region(NameTable::Id id) const;
  /// The value of counter `id`, or nullopt when absent in this update (at most once per
  /// record, as for region()).
  [[nodiscard]] std::optional<double> counter(NameTable::Id id) const;
  /// The field `key` of those kept verbatim (`extra`: start_unix_ms, gpu_busy_ms, the
  /// job's own), or nullptr.
  [[nodiscard]] const RawField* find_extra(std::string_view key) const;
  /// The number that extra field `key` holds (its whole JSON text read as a double), or
  /// nullopt when the field is absent or is no number.
  [[nodiscard]] std::optional<double> extra_number(std::string_view key) const;
};

}  // namespace stepprof
