// Pieces shared by the JSON renderers (`report --format json`, `whatif --format json`):
// absent-as-null, the diagnostics block, and the final text. Internal to the renderers.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

using Json = nlohmann::ordered_json;

/// The value, or null when absent (absent is never written as 0).
template <typename T>
Json opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

/// A rank number, or null for -1 (the analyses' "the log names no rank").
inline Json rank_json(std::int64_t rank) { return rank < 0 ? Json(nullptr) : Json(rank); }

/// {"errors", "warnings", "notes", "items": [{severity, code, file, line, column, message}]}
/// (docs/report-json.md "diagnostics").
Json diagnostics_json(const Diagnostics& d);

/// The document of a command that analyzed nothing (exit status 3: no update record could
/// be read): {"schema": `schema`, "analyzed": false, "diagnostics": ...}.
Json unanalyzed_json(const char* schema, const Diagnostics& d);

/// The document indented by 2, invalid UTF-8 from the logs replaced (U+FFFD), and a newline.
std::string dump_json(const Json& j);

}  // namespace stepprof::detail
