#include "stepprof/analysis/cross_rank.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace stepprof {

std::vector<StragglerEpisode> find_straggler_episodes(const std::vector<UpdateSlowest>& per_update,
                                                      double& threshold_ms, const std::vector<RankWork>& ranks) {
  std::vector<StragglerEpisode> out;
  threshold_ms = 0;
  if (per_update.empty()) return out;
  std::vector<double> margins, work;
  for (const auto& u : per_update) {
    margins.push_back(u.margin_ms);
    work.push_back(u.median_compute_ms);
  }
  const double typical = *median(margins);
  for (double& m : margins) m = std::fabs(m - typical);
  const double robust_sd = 1.4826 * *median(margins);
  threshold_ms = typical + std::max(3 * robust_sd, 0.05 * *median(work));

  // Each rank's behind updates (index into per_update, its margin), and how many ranks
  // are behind in each update.
  std::map<std::int64_t, std::vector<std::pair<std::size_t, double>>> behind;
  std::vector<std::uint32_t> behind_in(per_update.size(), 0);
  for (std::size_t i = 0; i < per_update.size(); ++i) {
    const UpdateSlowest& u = per_update[i];
    if (u.margin_ms <= threshold_ms) continue;  // the slowest rank is not behind: nor is any other
    if (ranks.empty()) {
      behind[u.slowest_rank].emplace_back(i, u.margin_ms);
      ++behind_in[i];
      continue;
    }
    for (const RankWork& r : ranks) {
      const double margin = (*r.compute_ms)[i] - u.median_compute_ms;
      if (margin <= threshold_ms) continue;
      behind[r.rank].emplace_back(i, margin);
      ++behind_in[i];
    }
  }
  // The ranks behind in update i other than `rank` (for `alongside`).
  auto others_in = [&](std::size_t i, std::int64_t rank, std::vector<std::int64_t>& into) {
    if (ranks.empty()) return;  // only the slowest rank is known
    for (const RankWork& r : ranks)
      if (r.rank != rank && (*r.compute_ms)[i] - per_update[i].median_compute_ms > threshold_ms) into.push_back(r.rank);
  };
  constexpr std::size_t kMaxGap = 2, kMinBehind = 3, kAlongsideUpTo = 8;
  std::vector<double> run_margins;
  for (const auto& [rank, at] : behind) {
    for (std::size_t b = 0; b < at.size();) {
      std::size_t e = b + 1;
      while (e < at.size() && at[e].first - at[e - 1].first <= kMaxGap + 1) ++e;
      if (e - b >= kMinBehind) {
        StragglerEpisode ep;
        ep.rank = rank;
        ep.first_step = per_update[at[b].first].step;
        ep.last_step = per_update[at[e - 1].first].step;
        ep.updates = at[e - 1].first - at[b].first + 1;
        ep.behind = e - b;
        run_margins.clear();
        for (std::size_t k = b; k < e; ++k) {
          run_margins.push_back(at[k].second);
          ep.excess_ms += at[k].second - typical;
          if (behind_in[at[k].first] > 1) {
            ++ep.shared;
            others_in(at[k].first, rank, ep.alongside);
          }
        }
        std::sort(ep.alongside.begin(), ep.alongside.end());
        ep.alongside.erase(std::unique(ep.alongside.begin(), ep.alongside.end()), ep.alongside.end());
        if (ep.alongside.size() > kAlongsideUpTo) ep.alongside.resize(kAlongsideUpTo);
        ep.margin_ms = *median(run_margins);
        out.push_back(std::move(ep));
      }
      b = e;
    }
  }
  std::sort(out.begin(), out.end(), [](const StragglerEpisode& a, const StragglerEpisode& b) {
    return std::tie(a.first_step, a.rank) < std::tie(b.first_step, b.rank);
  });
  return out;
}

CrossRankResult analyze_cross_rank(const AnalysisInput& in, const std::vector<WaitingResult>& waiting,
                                   std::optional<std::int64_t> world_size, double threshold) {
  CrossRankResult out;
  out.threshold = threshold;
  std::vector<const RankLog*> ranks;
  for (const auto& r : in.data.ranks)
    if (r.rank && !r.updates.empty()) ranks.push_back(&r);
  out.ranks = ranks.size();
  if (world_size)
    for (std::int64_t r = 0; r < *world_size; ++r)
      if (std::none_of(ranks.begin(), ranks.end(), [&](const RankLog* l) { return *l->rank == r; }))
        out.ranks_missing.push_back(r);
  if (ranks.size() < 2) {
    out.why_not = ranks.size() == 1 ? "one rank only: give every rank's log" : "no rank numbers in the logs";
    return out;
  }

  std::optional<NameTable::Id> comm;
  if (auto found = find_comm_region(in)) {
    comm = found->id;
    out.comm_region = std::string(in.data.regions.name(found->id));
    out.comm_found_by = found->found_by;
  }
  const bool comm_dev = comm && in.has_device_time(*comm);
  // A rank whose log never has the communication region (named differently there) cannot
  // be compared: its own work would be its whole wall_ms, waits included, and it would
  // look like the straggler. It is left out, and named.
  if (comm) {
    std::vector<const RankLog*> with;
    for (const auto* r : ranks) {
      const bool has = std::any_of(r->updates.begin(), r->updates.end(),
                                   [&](const UpdateRecord& u) { return u.region(*comm) != nullptr; });
      if (has) with.push_back(r);
      else out.ranks_without_comm.push_back(*r->rank);
    }
    if (with.size() < 2) {
      out.why_not = fmt::format("only {} of the {} ranks' logs have the communication region {}; does the others' "
                                "log name it differently?",
                                with.size(), ranks.size(), out.comm_region);
      return out;
    }
    ranks.swap(with);
  }

  // Every step of any rank, ascending; each rank's updates are in step order.
  // (Usually every rank has the same steps: a rank's list is merged in only when it differs.)
  std::vector<std::int64_t> steps, mine, merged;
  for (const auto* r : ranks) {
    mine.clear();
    for (const auto& u : r->updates) mine.push_back(u.step);
    if (!std::is_sorted(mine.begin(), mine.end())) std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    if (mine == steps) continue;
    merged.clear();
    std::set_union(steps.begin(), steps.end(), mine.begin(), mine.end(), std::back_inserter(merged));
    steps.swap(merged);
  }
  // compute_ms [step index * ranks + rank index]; NaN where the rank lacks the step.
  const std::size_t nr = ranks.size();
  std::vector<double> compute_at(steps.size() * nr, std::numeric_limits<double>::quiet_NaN());
  std::vector<std::vector<double>> comm_series(nr);
  for (std::size_t i = 0; i < nr; ++i) {
    const auto first = in.first_update_of(*ranks[i]);
    std::size_t s = 0;
    for (std::size_t j = 0; j < ranks[i]->updates.size(); ++j) {
      const UpdateRecord& u = ranks[i]->updates[j];
      double c = 0;
      if (comm) {
        if (auto t = first ? in.region_ms_of(*first + j, u, *comm, comm_dev) : region_ms(u, *comm, comm_dev)) {
          c = *t;
          comm_series[i].push_back(*t);
        }
      }
      if (s + 1 < steps.size() && steps[s + 1] == u.step) ++s;  // usually the next step
      else if (steps[s] != u.step)  // any order is found
        s = static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), u.step) - steps.begin());
      compute_at[s * nr + i] = std::max(0.0, u.wall_ms - c);
    }
  }

  std::vector<std::vector<double>> compute(nr), wait(nr);
  std::vector<std::size_t> slowest_count(nr, 0);
  std::vector<double> margins, v(nr);
  for (std::size_t si = 0; si < steps.size(); ++si) {
    const std::int64_t step = steps[si];
    const double* row = &compute_at[si * nr];
    std::vector<std::int64_t> lacking;
    for (std::size_t i = 0; i < nr; ++i)
      if (std::isnan(row[i])) lacking.push_back(*ranks[i]->rank);
    if (!lacking.empty()) {
      ++out.steps_incomplete;
      if (out.incomplete_examples.size() < 10) out.incomplete_examples.emplace_back(step, std::move(lacking));
      continue;
    }
    ++out.steps_aligned;
    v.assign(row, row + nr);
    const auto slow = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    const double median = *stepprof::median(v);  // (reorders v: read v[slow] first)
    const double slowest = row[slow];
    out.per_update.push_back({step, *ranks[slow]->rank, slowest, median, slowest - median});
    margins.push_back(slowest - median);
    ++slowest_count[slow];
    for (std::size_t i = 0; i < nr; ++i) {
      compute[i].push_back(row[i]);
      wait[i].push_back(slowest - row[i]);
    }
  }
  if (out.steps_aligned == 0) {
    out.why_not = "no step is present in every rank's log";
    return out;
  }
  out.available = true;
  out.margin_ms = summarize(margins);
  std::vector<RankWork> work(nr);
  for (std::size_t i = 0; i < nr; ++i) work[i] = {*ranks[i]->rank, &compute[i]};
  out.episodes = find_straggler_episodes(out.per_update, out.episode_threshold_ms, work);

  double fastest_median = 0;
  bool first = true;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    RankStraggler r;
    r.rank = *ranks[i]->rank;
    r.compute_ms = *summarize(compute[i]);
    r.wait_ms = *summarize(wait[i]);
    r.comm_ms = summarize(comm_series[i]);
    r.times_slowest = slowest_count[i];
    if (first || r.compute_ms.median < fastest_median) fastest_median = r.compute_ms.median;
    first = false;
    for (const auto& w : waiting)
      if (w.rank == r.rank && w.wait_ms) {
        r.single_rank_wait_median_ms = w.wait_ms->median;
        r.single_rank_waiting = w.waiting;
      }
    out.per_rank.push_back(r);
  }
  for (auto& r : out.per_rank) {
    r.relative_score = r.compute_ms.median > 0 ? fastest_median / r.compute_ms.median : 1;
    r.individual_score = r.compute_ms.median > 0 ? r.compute_ms.min / r.compute_ms.median : 1;
    r.straggler = r.relative_score < threshold;
    if (r.straggler) out.stragglers.push_back(r.rank);
  }
  return out;
}

}  // namespace stepprof
