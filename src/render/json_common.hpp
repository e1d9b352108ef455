// Pieces shared by the JSON renderers (`report --format json`, `whatif --format json`):
// absent-as-null, the diagnostics block, and the final text. Internal to the renderers.
#pragma once

#include <cmath>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pieces.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

using Json = nlohmann::ordered_json;

/// The value, or null when absent (absent is never written as 0).
template <typename T>
Json opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

/// A count held as a double (a sum of counters, a length): a JSON integer when it is a
/// whole number within 2^53, as docs/report-json.md says counts are; else the number.
inline Json count_json(double v) {
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (std::isfinite(v) && v == std::nearbyint(v) && std::fabs(v) <= kExact) return Json(static_cast<std::int64_t>(v));
  return Json(v);
}
/// As count_json, or null when absent.
inline Json count_json(const std::optional<double>& v) { return v ? count_json(*v) : Json(nullptr); }

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

/// Writes a document in pieces, byte for byte as dump_json() writes it whole: members and
/// array elements are given one at a time and each is formatted by nlohmann::json, so that
/// a member per rank is never one tree (the report of 65,536 ranks is 183 MB of JSON,
/// whose tree took about 870 MB). Hands `write` pieces of about 1 MiB, in order.
/// Usage: begin_object(); key("a"); value(1); key("b"); begin_array(); value(2);
/// end_array(); end_object(); finish().
class JsonWriter {
 public:
  explicit JsonWriter(std::function<bool(std::string_view)> write) : out_(std::move(write)) {}
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  /// The next member's key (inside an object).
  void key(std::string_view k);
  /// A member's value (after key()) or the next element of an array.
  void value(const Json& v);
  void member(std::string_view k, const Json& v) {
    key(k);
    value(v);
  }
  /// Writes the object `head` member by member, except the member `array_key` (a
  /// placeholder in `head`, where it goes): an array of `n` elements, element(i) made and
  /// written one at a time.
  void object_with_array(const Json& head, std::string_view array_key, std::size_t n,
                         const std::function<Json(std::size_t)>& element);
  /// Ends the document (its newline) and writes what is left; false when a write failed.
  bool finish();
  /// False once a write failed: what is given after it is dropped, so a caller making a
  /// long document stops (object_with_array does).
  [[nodiscard]] bool ok() const { return out_.ok(); }

 private:
  struct Level {
    bool object = false;
    std::size_t items = 0;
  };
  void open(char bracket);
  void close(char bracket);
  void next_item();  // the separator and indent before a member or element
  void indent(std::size_t levels) { out_.text().append(2 * levels, ' '); }

  Pieces out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace stepprof::detail
