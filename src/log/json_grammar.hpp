// The JSON grammar checked by itself (RFC 8259, sections 2-7), without converting a number
// or decoding a string: what the reader and the config model use to tell whether a value
// kept verbatim (a field of the job's own) is one JSON value, and whether one of its objects
// gives a key twice. One implementation for both (src/read/record_parser.cpp for update
// records, src/log/record.cpp for config records).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace stepprof::detail {

/// Deepest nesting the grammar check follows (simdjson's default maximum depth).
inline constexpr int kMaxJsonDepth = 1024;

/// What is wrong with a value (json_value_problem).
struct JsonValueProblem {
  std::size_t offset = 0;  ///< byte offset in the value's text: the fault, or the second key given twice
  bool non_finite = false;  ///< JSON but for a NaN or Infinity token (offset: the first)
  bool too_deep = false;    ///< valid so far, but nested deeper than kMaxJsonDepth
  std::optional<std::string> repeated_key;  ///< JSON, but an object gives this key (decoded) twice ("" too)
};

/// nullopt when `json` is one JSON value (surrounding whitespace allowed), else its first
/// problem. Numbers are checked against the grammar only, so 1e400 and a 400-digit
/// integer are JSON (RFC 8259 sets no range), as is a lone surrogate escape such as
/// "\udcff" (Python's json writes one for an undecodable file name). UTF-8 is not checked
/// (the caller's parser has). Priority: a fault of the grammar (or too deep), then a
/// NaN/Infinity token, then a key given twice in one object, keys compared as decoded
/// ("a" and "\u0061" are one key). One pass; O(k log k) per object of k keys.
std::optional<JsonValueProblem> json_value_problem(std::string_view json);

/// True for NaN or Infinity as a whole token, in any case and with a sign: NaN,
/// -Infinity, nan, inf, +Inf (Python's json writes the first three kinds); false for a
/// word that only starts so ("info", "nancy").
bool is_non_finite_token(std::string_view tok);

}  // namespace stepprof::detail
