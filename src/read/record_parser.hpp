// Parses one step-log record (one JSON object) into the log model, checking every
// field against docs/log-schema.md. Internal to the reader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "stepprof/diagnostics.hpp"
#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof::detail {

/// Readable bytes the parser needs after the end of each record's text
/// (simdjson::SIMDJSON_PADDING; checked where simdjson is included).
inline constexpr std::size_t kParsePadding = 64;

/// Why a record was rejected: the problem kind, a 1-based column within the record
/// text (0 when unknown) and a message saying what was expected.
struct RecordError {
  Problem problem = Problem::kMalformedJson;
  std::uint64_t column = 0;
  std::string message;
  /// What may have caused it, when the line alone cannot tell (e.g. "text after the
  /// record, or the line was cut short"); said only where the reader cannot tell either.
  std::string_view cause;
  /// The record is a JSON object without a "type" field (a job's own JSON output, or a
  /// record that lost its type): the reader tells the two apart.
  bool no_type = false;
};

enum class RecordKind { kConfig, kUpdate, kUnknownType, kError };

/// The field of an update record's schema (docs/log-schema.md) that `key`, a field not in
/// it whose value is `value_json`, looks like a misspelling of: a schema field of 5 or
/// more characters whose value is of the same kind (object, array, number, string), at
/// most one edit (an inserted, deleted or changed character; two for names of 8
/// characters or more) away, case folded. None for a field of the job's own far from
/// every schema field (`loss`, `lr`), short (`steps`), or of another kind
/// (`cuda_stream_id`: 3).
std::optional<std::string_view> schema_field_near(std::string_view key, std::string_view value_json);

/// Reusable parser: one instance per reading thread. Interns region and counter names
/// into the tables given at construction (which must outlive it).
class RecordParser {
 public:
  RecordParser(NameTable& regions, NameTable& counters);
  ~RecordParser();
  RecordParser(const RecordParser&) = delete;
  RecordParser& operator=(const RecordParser&) = delete;

  /// Parses `text`, which must be followed by kParsePadding readable bytes.
  /// On kConfig fills `config_fields` (all fields but `type`, verbatim); on kUpdate
  /// fills `update` (reset first; its vectors keep their capacity, so a parser that
  /// reuses one UpdateRecord allocates nothing per valid record); on kUnknownType sets
  /// `unknown_type`; on kError fills `error`.
  RecordKind parse(std::string_view text, std::vector<RawField>& config_fields, UpdateRecord& update,
                   std::string& unknown_type, RecordError& error);

  /// Whether `update.sample_indices` is filled (default true). When false, a
  /// `sample_indices` array of plain non-negative integers is checked by a scan of its
  /// bytes and not parsed value by value (its values are not kept); any other array is
  /// parsed as before, so the problems reported are the same either way.
  void set_keep_sample_indices(bool keep);

  /// Problems of the record that `parse` last returned kUpdate for which left one of its
  /// fields out rather than the record: a field of the job's own (not in the schema)
  /// holding NaN or Infinity, alone or inside an array or object, which JSON does not
  /// allow (Python's json writes them for a non-finite float: `"loss": NaN` after a
  /// divergence). Problem::kNonFinite; columns as in RecordError. (Other text that is not
  /// JSON in such a field rejects the record, kMalformedJson.)
  [[nodiscard]] const std::vector<RecordError>& fields_left_out() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stepprof::detail
