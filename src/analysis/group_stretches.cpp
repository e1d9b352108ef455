#include "stepprof/analysis/group_stretches.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/stats.hpp"

namespace stepprof {
namespace {

// One candidate set: its ranks' places in `ranks`.
struct Candidate {
  const ConfigDifference* field;
  const std::string* value;
  std::vector<std::size_t> members;  // places in `ranks`, ascending rank
};

bool subset_of(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  return a.size() < b.size() && std::includes(b.begin(), b.end(), a.begin(), a.end());
}

}  // namespace

std::vector<GroupStretch> find_group_stretches(const std::vector<RankWork>& ranks,
                                               const std::vector<UpdateSlowest>& per_update,
                                               const std::vector<ConfigDifference>& classes) {
  std::vector<GroupStretch> out;
  const std::size_t n = ranks.size(), updates = per_update.size();
  if (n < 4 || updates < kGroupMinUpdates) return out;  // (two ranks of a set and two others at least)
  std::vector<std::int64_t> numbers(n);
  for (std::size_t i = 0; i < n; ++i) numbers[i] = ranks[i].rank;
  std::vector<std::size_t> by_rank_order(n);  // places sorted by rank, to find a rank by binary search
  for (std::size_t i = 0; i < n; ++i) by_rank_order[i] = i;
  std::sort(by_rank_order.begin(), by_rank_order.end(), [&](std::size_t a, std::size_t b) { return numbers[a] < numbers[b]; });
  const auto find_place = [&](std::int64_t rank) -> std::size_t {
    const auto it = std::lower_bound(by_rank_order.begin(), by_rank_order.end(), rank,
                                     [&](std::size_t p, std::int64_t r) { return numbers[p] < r; });
    return it != by_rank_order.end() && numbers[*it] == rank ? *it : n;
  };

  // Each rank's median own work, and per update whether it is up.
  std::vector<double> median_of(n, 0), v;
  std::vector<std::vector<char>> up(n, std::vector<char>(updates, 0));
  for (std::size_t i = 0; i < n; ++i) {
    v = *ranks[i].compute_ms;
    median_of[i] = median(v).value_or(0.0);
    if (!(median_of[i] > 0)) continue;
    for (std::size_t k = 0; k < updates; ++k) up[i][k] = (*ranks[i].compute_ms)[k] >= kGroupFactor * median_of[i];
  }
  std::vector<std::size_t> up_count(updates, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < updates; ++k) up_count[k] += up[i][k];

  std::vector<Candidate> candidates;
  for (const auto& d : classes)
    for (const auto& [value, members] : d.values) {
      if (value.empty()) continue;  // (the sizes are checked on the ranks compared, below)
      Candidate c{&d, &value, {}};
      for (const std::int64_t r : members)
        if (const std::size_t p = find_place(r); p < n) c.members.push_back(p);
      if (c.members.size() < 2 || 2 * c.members.size() > n) continue;
      candidates.push_back(std::move(c));
    }

  std::vector<double> ratios, others;
  std::vector<char> theirs_at(updates);
  for (const Candidate& c : candidates) {
    const std::size_t m = c.members.size(), rest = n - m;
    std::vector<char> in_set(n, 0);
    for (const std::size_t p : c.members) in_set[p] = 1;
    std::size_t theirs_count = 0;
    for (std::size_t t = 0; t < updates; ++t) {
      std::size_t mine = 0;
      for (const std::size_t p : c.members) mine += up[p][t];
      theirs_at[t] = 4 * mine >= 3 * m && 4 * (up_count[t] - mine) <= rest;
      theirs_count += theirs_at[t];
    }
    // Beyond chance: with the set's updates a share q of all, runs of `len` or more come
    // by chance about updates x q^len times; over every candidate set that must stay below
    // kChance (tensor-parallel pairs whose jitter is shared were 68 stretches of noise).
    const double q = static_cast<double>(theirs_count) / static_cast<double>(updates);
    const auto by_chance = [&](std::size_t len) {
      return static_cast<double>(updates) * std::pow(q, static_cast<double>(len)) *
                 static_cast<double>(candidates.size()) >= kGroupChance;
    };
    std::size_t k = 0;
    while (k < updates) {
      const auto theirs = [&](std::size_t at) { return theirs_at[at] != 0; };
      if (!theirs(k)) {
        ++k;
        continue;
      }
      std::size_t e = k;
      while (e < updates && theirs(e)) ++e;
      const std::size_t len = e - k;
      if (len >= kGroupMinUpdates && 2 * len < updates && !by_chance(len)) {
        GroupStretch g;
        for (const std::size_t p : c.members) g.ranks.push_back(numbers[p]);
        std::sort(g.ranks.begin(), g.ranks.end());
        g.key = c.field->key;
        g.value = *c.value;
        g.first_step = per_update[k].step;
        g.last_step = per_update[e - 1].step;
        g.updates = len;
        ratios.clear();
        others.clear();
        for (std::size_t t = k; t < e; ++t)
          for (std::size_t i = 0; i < n; ++i)
            if (median_of[i] > 0) (in_set[i] ? ratios : others).push_back((*ranks[i].compute_ms)[t] / median_of[i]);
        g.factor = median(ratios).value_or(1.0);
        g.others_factor = median(others).value_or(1.0);
        double gain = 0;
        for (std::size_t t = k; t < e; ++t) {
          double all = -std::numeric_limits<double>::infinity(), without = all;
          for (std::size_t i = 0; i < n; ++i) {
            const double w = (*ranks[i].compute_ms)[t];
            all = std::max(all, w);
            without = std::max(without, in_set[i] && g.factor > 0 ? w / g.factor : w);
          }
          gain += std::max(0.0, all - without);
        }
        g.excess_ms = gain / static_cast<double>(len);
        g.at_stake_ms = gain / static_cast<double>(updates);
        out.push_back(std::move(g));
      }
      k = e;
    }
  }
  // (At most kKeep, the costliest: the check below is quadratic.)
  constexpr std::size_t kKeep = 1000;
  if (out.size() > kKeep) {
    std::stable_sort(out.begin(), out.end(),
                     [](const GroupStretch& x, const GroupStretch& y) { return x.at_stake_ms > y.at_stake_ms; });
    out.resize(kKeep);
  }
  // One stretch per set of ranks and updates (the first field's), and none of a subset of
  // another's ranks in overlapping updates.
  const auto overlaps = [](const GroupStretch& a, const GroupStretch& b) {
    return a.first_step <= b.last_step && b.first_step <= a.last_step;
  };
  std::vector<GroupStretch> kept;
  for (std::size_t a = 0; a < out.size(); ++a) {
    bool drop = false;
    for (std::size_t b = 0; b < out.size() && !drop; ++b) {
      if (a == b || !overlaps(out[a], out[b])) continue;
      drop = subset_of(out[a].ranks, out[b].ranks) ||
             (out[a].ranks == out[b].ranks && b < a && out[a].first_step == out[b].first_step &&
              out[a].last_step == out[b].last_step);
    }
    if (!drop) kept.push_back(out[a]);
  }
  std::sort(kept.begin(), kept.end(), [](const GroupStretch& x, const GroupStretch& y) {
    return std::tie(x.first_step, x.ranks) < std::tie(y.first_step, y.ranks);
  });
  return kept;
}

}  // namespace stepprof
