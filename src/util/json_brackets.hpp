// The brackets of JSON text, its strings skipped: one walk shared by the config's nesting
// check (src/log/record.cpp) and the reader's messages (src/read/json_error.cpp).
#pragma once

#include <cstddef>
#include <string_view>

namespace stepprof::detail {

/// Calls `f(offset, c)` for each '{', '[', '}' and ']' of `json` outside its strings
/// (a string's escapes are skipped, so "\"" does not end it), in order, until `f`
/// returns true; returns the offset where it did, or npos. No validation: the text may be
/// malformed (a cut line, mismatched brackets).
template <typename F>
std::size_t find_bracket(std::string_view json, F&& f) {
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '{' || c == '[' || c == '}' || c == ']') && f(i, c)) {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace stepprof::detail
