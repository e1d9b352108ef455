// ASCII text helpers shared by the log model and the reader.
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

}  // namespace stepprof::detail
