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

/// Of the rows `must` marks beyond the slowest and fastest, at most this many are shown
/// (a pipeline stage of 1,024 slow ranks made a table of 1,035 rows).
inline constexpr std::size_t kFlaggedUpTo = 24;

/// Which of `n` per-rank rows to show: every row for up to kAllRanksUpTo ranks
/// (nullopt); beyond that the 8 rows with the largest `key(i)` (the slowest ranks), the
/// 3 with the smallest, and the rows `must(i)` marks (the kFlaggedUpTo slowest of them),
/// ordered by key, largest first; nullopt as well when that is every row.
template <class Key, class Must>
std::optional<std::vector<std::size_t>> rows_that_matter(std::size_t n, Key key, Must must) {
  constexpr std::size_t kHigh = 8, kLow = 3;
  if (n <= kAllRanksUpTo) return std::nullopt;
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
  std::vector<std::size_t> shown;
  std::size_t flagged = 0;
  for (std::size_t k = 0; k < n; ++k)
    if (k < kHigh || k + kLow >= n || (must(order[k]) && flagged++ < kFlaggedUpTo)) shown.push_back(order[k]);
  if (shown.size() == n) return std::nullopt;  // (every row is flagged: nothing to leave out)
  return shown;
}

// The line under a shortened per-rank table: how many ranks it leaves out and the range
// of `what` among them.
// (`must`: the rows rows_that_matter was given to show; those it left out are counted.)
template <class Key, class Must>
Paragraph rows_left_out(std::size_t n, const std::vector<std::size_t>& shown, Key key, Must must,
                        std::string_view what, std::string_view also_shown = {}) {
  std::vector<bool> in(n, false);
  for (auto i : shown) in[i] = true;
  double lo = 0, hi = 0;
  bool any = false;
  std::size_t flagged_out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (in[i]) continue;
    lo = any ? std::min(lo, key(i)) : key(i);
    hi = any ? std::max(hi, key(i)) : key(i);
    any = true;
    if (must(i)) ++flagged_out;
  }
  const std::string range = lo == hi ? fmt::format("are all at {}", ms(lo)) : fmt::format("lie between {} and {}", ms(lo), ms(hi));
  return Paragraph{fmt::format("{} ranks: shown are the slowest and the fastest by {}, slowest first{}{}; the other "
                               "{} ranks {}{} (every rank is in --format json)",
                               n, what, also_shown, flagged_out ? fmt::format(" (the {} slowest of them)", kFlaggedUpTo) : "",
                               n - shown.size(), range,
                               flagged_out ? fmt::format(", {} of them flagged too", flagged_out) : "")};
}

}  // namespace stepprof::detail
