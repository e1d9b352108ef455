// Serializes records to the step-log's JSON-lines form (docs/log-schema.md).
// Used by the recorder, the Kineto importer and the log generator, so every
// stepprof log has the same shape as the real log the reader is tested on.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof {

/// The config record as one JSON object on one line (no trailing newline):
/// `{"type": "config", <fields in order>}`. Raw field values must be valid JSON;
/// an invalid one is written as a JSON string holding its text.
std::string config_to_json(const RunConfig& config);

/// The update record as one JSON object on one line (no trailing newline), with the
/// real log's field names and order: type, rank, step, wall_ms, cuda_stream_ms,
/// cpu_call_ms, calls, parents, counts, frame_histogram, input_shapes,
/// sample_indices, padding_fraction, microbatches, recorder_errors, then `extra`. Absent values are
/// omitted, never written as 0. Input shapes are written as Python tuple text,
/// e.g. "(8, 3154)", as in the real log.
std::string update_to_json(const UpdateRecord& update, const NameTable& regions,
                           const NameTable& counters);

/// update_to_json, appended to `out` (which keeps its capacity: the recorder writes
/// every record through one buffer). Linear in the record's size.
void append_update_json(const UpdateRecord& update, const NameTable& regions, const NameTable& counters,
                        std::string& out);

/// A string as JSON text (quoted, escaped), for a RawField value: `a"b` -> `"a\"b"`.
/// Invalid UTF-8 is replaced (U+FFFD), as in the record serializers.
std::string json_string(std::string_view text);

/// `text` as the serializers write it: every byte sequence that is not UTF-8 replaced
/// by U+FFFD (nlohmann::json's error_handler_t::replace), e.g. "a\xff" -> "a\xef\xbf\xbd";
/// valid UTF-8 is returned unchanged. The recorder interns names in this form, so that
/// two names that differ only in invalid bytes are one key in the log, not two equal keys.
std::string as_written(std::string_view text);

/// A {key: string} object as JSON text, keys in the given order (a repeated key keeps
/// its first position and its last value), e.g. for `region_alternatives`.
std::string json_string_map(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace stepprof
