// Text helpers shared by the log model and the reader.
#pragma once

#include <algorithm>
#include <string_view>

namespace stepprof::detail {

/// True when `a` and `b` are equal with ASCII letters compared without case ("Config" and
/// "config"); other bytes compare as they are.
inline bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch; };
           return lower(x) == lower(y);
         });
}

/// The longest prefix of `s` of at most `max_bytes` bytes that does not end inside a
/// UTF-8 character (it backs off continuation bytes at the cut), for a shortened name or
/// value in a message: a character cut in two printed as a byte the name lacks.
inline std::string_view prefix_at_character(std::string_view s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace stepprof::detail
