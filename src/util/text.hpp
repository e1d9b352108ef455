// Text helpers shared by the log model and the reader.
#pragma once

#include <algorithm>
#include <cstddef>
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

/// The length [bytes] of the well-formed UTF-8 sequence that starts at text[i] (RFC 3629,
/// section 4: no overlong form, no surrogate, nothing above U+10FFFF; 1 for ASCII), or 0
/// when none does there (or i is past the end).
inline std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned b0 = at(0);
  const auto tail = [&](std::size_t from, std::size_t n) {
    for (std::size_t k = from; k < n; ++k)
      if (at(k) < 0x80 || at(k) > 0xBF) return false;
    return true;
  };
  if (i >= text.size()) return 0;
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return tail(1, 2) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    return at(1) >= lo && at(1) <= hi && tail(2, 3) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return at(1) >= lo && at(1) <= hi && tail(2, 4) ? 4 : 0;
  }
  return 0;
}

/// The longest prefix of `s` of at most `max_bytes` bytes that does not end inside a
/// well-formed UTF-8 character (a character the cut would split is left out whole), for a
/// shortened name or value in a message: a character cut in two printed as a byte the
/// name lacks. Bytes that are no valid UTF-8 are cut anywhere (each is one \xNN when
/// printed): a run of them is not backed off.
inline std::string_view prefix_at_character(std::string_view s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  for (std::size_t k = 1; k <= 3 && k <= max_bytes; ++k) {
    if ((static_cast<unsigned char>(s[max_bytes - k]) & 0xC0) == 0x80) continue;  // (look back for its lead)
    if (utf8_length(s, max_bytes - k) > k) return s.substr(0, max_bytes - k);  // a character the cut splits
    break;
  }
  return s.substr(0, max_bytes);
}

}  // namespace stepprof::detail
