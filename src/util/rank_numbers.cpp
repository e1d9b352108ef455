#include "rank_numbers.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace stepprof::detail {

std::string rank_numbers(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  // Runs of consecutive ranks are written as ranges: of 3 or more in a long list, of 4 or
  // more in a short one ("4088..4095", not "4088, 4089, ..., 4095"; "0, 1, 2" stays).
  const std::int64_t min_span = v.size() <= kListedUpTo ? 3 : 2;
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // first, last; consecutive ranks
  for (const auto r : v) {
    if (!runs.empty() && runs.back().second + 1 == r) runs.back().second = r;
    else runs.emplace_back(r, r);
  }
  std::string s;
  std::size_t items = 0, listed = 0;  // items written, ranks they cover
  for (const auto& [first, last] : runs) {
    if (items >= kListedUpTo) break;
    if (last - first >= min_span) {
      s += fmt::format("{}{}..{}", items ? ", " : "", first, last);
      ++items;
      listed += static_cast<std::size_t>(last - first + 1);
      continue;
    }
    for (auto r = first; r <= last && items < kListedUpTo; ++r, ++items, ++listed)
      s += fmt::format("{}{}", items ? ", " : "", r);
  }
  if (listed < v.size()) s += fmt::format(" and {} more", v.size() - listed);
  return s;
}

std::string file_list(const std::vector<std::string>& files) {
  std::string s;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files.size() > kListedUpTo && i == 2) return s + fmt::format(", ... ({} files in all), {}", files.size(), files.back());
    s += (s.empty() ? "" : ", ") + files[i];
  }
  return s;
}

}  // namespace stepprof::detail
