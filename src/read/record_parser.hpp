// Parses one step-log record (one JSON object) into the log model, checking every
// field against docs/log-schema.md. Internal to the reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "stepprof/diagnostics.hpp"
#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof::detail {

/// Readable bytes the parser needs after the end of each record's text.
inline constexpr std::size_t kParsePadding = simdjson::SIMDJSON_PADDING;

/// Why a record was rejected: the problem kind, a 1-based column within the record
/// text (0 when unknown) and a message saying what was expected.
struct RecordError {
  Problem problem = Problem::kMalformedJson;
  std::uint64_t column = 0;
  std::string message;
};

enum class RecordKind { kConfig, kUpdate, kUnknownType, kError };

/// Reusable parser: one instance per reading thread. Interns region and counter names
/// into the tables given at construction.
class RecordParser {
 public:
  RecordParser(NameTable& regions, NameTable& counters) : regions_(regions), counters_(counters) {}

  /// Parses `text`, which must be followed by kParsePadding readable bytes.
  /// On kConfig fills `config_fields` (all fields but `type`, verbatim); on kUpdate
  /// fills `update` (reset first); on kUnknownType sets `unknown_type`; on kError fills
  /// `error`.
  RecordKind parse(std::string_view text, std::vector<RawField>& config_fields,
                   UpdateRecord& update, std::string& unknown_type, RecordError& error);

 private:
  // Remembers the key order of the previous record per map, so a log whose records
  // repeat the same keys (every real log) interns each key with one string compare.
  struct KeyCache {
    std::vector<std::pair<std::string, NameTable::Id>> slots;
    NameTable::Id lookup(std::size_t pos, std::string_view key, NameTable& table);
  };

  bool parse_update(simdjson::ondemand::document& doc, simdjson::ondemand::object& obj,
                    std::string_view text, UpdateRecord& u, RecordError& error);

  simdjson::ondemand::parser parser_;
  NameTable& regions_;
  NameTable& counters_;
  KeyCache device_keys_, host_keys_, calls_keys_, parent_keys_, counter_keys_;
  std::vector<std::int32_t> slot_of_region_;  // region id -> index in update.regions, -1 if none
};

}  // namespace stepprof::detail
