// Reports of jobs with many ranks: rank lists as ranges, and which ranks per-rank
// tables and charts show. Internal to the renderers (document.cpp, html.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../util/rank_numbers.hpp"
#include "document.hpp"
#include "format.hpp"
#include "stepprof/analysis/cross_rank.hpp"

namespace stepprof::detail {

/// Per-rank tables and charts of more than kAllRanksUpTo ranks show only the ranks that
/// matter (rows_that_matter).
inline constexpr std::size_t kAllRanksUpTo = 32;

/// True when `rank` is a straggler or fell behind for a while (an episode): per-rank
/// tables and charts always show it.
inline bool flagged_rank(const CrossRankResult& x, std::int64_t rank) {
  return std::find(x.stragglers.begin(), x.stragglers.end(), rank) != x.stragglers.end() ||
         std::any_of(x.episodes.begin(), x.episodes.end(), [&](const StragglerEpisode& e) { return e.rank == rank; });
}

/// Which of `n` per-rank rows to show: every row for up to kAllRanksUpTo ranks
/// (nullopt); beyond that the 8 rows with the largest `key(i)` (the slowest ranks), the
/// 3 with the smallest, and every row `must(i)` marks, ordered by key, largest first;
/// nullopt as well when that is every row.
template <class Key, class Must>
std::optional<std::vector<std::size_t>> rows_that_matter(std::size_t n, Key key, Must must) {
  constexpr std::size_t kHigh = 8, kLow = 3;
  if (n <= kAllRanksUpTo) return std::nullopt;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
  std::vector<std::size_t> shown;
  for (std::size_t k = 0; k < n; ++k)
    if (k < kHigh || k + kLow >= n || must(order[k])) shown.push_back(order[k]);
  if (shown.size() == n) return std::nullopt;  // (every row is flagged: nothing to leave out)
  return shown;
}

// The line under a shortened per-rank table: how many ranks it leaves out and the range
// of `what` among them.
template <class Key>
Paragraph rows_left_out(std::size_t n, const std::vector<std::size_t>& shown, Key key, std::string_view what,
                        std::string_view also_shown = {}) {
  std::vector<bool> in(n, false);
  for (auto i : shown) in[i] = true;
  double lo = 0, hi = 0;
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (in[i]) continue;
    lo = any ? std::min(lo, key(i)) : key(i);
    hi = any ? std::max(hi, key(i)) : key(i);
    any = true;
  }
  return Paragraph{fmt::format("{} ranks: shown are the slowest and the fastest by {}, slowest first{}; the other "
                               "{} ranks lie between {} and {} (every rank is in --format json)",
                               n, what, also_shown, n - shown.size(), ms(lo), ms(hi))};
}

}  // namespace stepprof::detail
