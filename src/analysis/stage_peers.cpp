#include "stepprof/analysis/stage_peers.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "stepprof/analysis/stats.hpp"

namespace stepprof {
namespace {

bool names_pipeline_stage(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view k = key;
  // (A size or degree is the same on every rank; a ZeRO stage is no pipeline stage.)
  for (const std::string_view no : {"size", "degree", "world", "zero", "num", "count"})
    if (k.find(no) != std::string_view::npos) return false;
  return k == "stage" || k.ends_with("_stage") || k.ends_with("stage_id") ||
         ((k.starts_with("pp_") || k.starts_with("pipeline")) && (k.ends_with("rank") || k.ends_with("_id")));
}

// One stage's aligned updates as find_straggler_episodes reads them: its slowest rank and
// its median rank.
std::vector<UpdateSlowest> stage_updates(const std::vector<RankWork>& work, const std::vector<UpdateSlowest>& per_update) {
  std::vector<UpdateSlowest> out;
  out.reserve(per_update.size());
  std::vector<double> v, others;
  for (std::size_t k = 0; k < per_update.size(); ++k) {
    v.clear();
    for (const auto& w : work) v.push_back((*w.compute_ms)[k]);
    const auto slow = static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    const double slowest = v[slow];
    others.clear();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (i != slow) others.push_back(v[i]);
    const double others_median = *median(others);
    const double mid = *median(v);
    out.push_back({per_update[k].step, work[slow].rank, slowest, mid, slowest - mid, per_update[k].update_ms,
                   others_median});
  }
  return out;
}

// Each rank's median own work over the updates [ms] (0 for none).
std::vector<double> rank_medians(const std::vector<RankWork>& work) {
  std::vector<double> out;
  for (const auto& w : work) {
    std::vector<double> c = *w.compute_ms;
    out.push_back(median(c).value_or(0));
  }
  return out;
}

// The stage's ranks whose median own work is below `threshold` x its fastest rank's: its
// stragglers, which find_recurring_lags leaves out (as analyze_cross_rank does).
std::vector<std::int64_t> stage_stragglers(const std::vector<RankWork>& work, double threshold) {
  const std::vector<double> medians = rank_medians(work);
  const double fastest = *std::min_element(medians.begin(), medians.end());
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < work.size(); ++i)
    if (medians[i] > 0 && fastest / medians[i] < threshold) out.push_back(work[i].rank);
  return out;
}

// The median of a stage's own work in one update without one rank's: the values sorted
// once, each query O(log m) (a copy per rank and update made 1,024-rank stages quadratic).
class OthersMedian {
 public:
  void load(const std::vector<RankWork>& work, std::size_t k) {
    sorted_.clear();
    for (const auto& w : work) sorted_.push_back((*w.compute_ms)[k]);
    std::sort(sorted_.begin(), sorted_.end());
  }
  void load(std::vector<double> values) {
    sorted_ = std::move(values);
    std::sort(sorted_.begin(), sorted_.end());
  }
  /// The median of the values without one equal to `x` (one of them; two values or more).
  [[nodiscard]] double without(double x) const {
    const auto idx = static_cast<std::size_t>(std::lower_bound(sorted_.begin(), sorted_.end(), x) - sorted_.begin());
    const std::size_t m = sorted_.size() - 1;
    const auto at = [&](std::size_t j) { return sorted_[j < idx ? j : j + 1]; };
    if (m % 2) return at(m / 2);
    const double a = at(m / 2 - 1);
    return a + 0.5 * (at(m / 2) - a);  // (as median() in stats.cpp: no overflow, the same bits)
  }

 private:
  std::vector<double> sorted_;
};

// The stage's ranks slower than its other ranks throughout: median own work at least
// 1 + kMinStageLag times the median of the others' medians, and 5 % or more above the
// others' median in at least 3/4 of the updates (not a stretch: a lag the median holds).
// With their places in `work`.
std::vector<std::pair<CrossRankResult::StageSlowRank, std::size_t>> slow_in_stage(const std::vector<RankWork>& work,
                                                                                   const std::string& stage) {
  const std::vector<double> medians = rank_medians(work);
  OthersMedian others;
  others.load(medians);
  std::vector<std::pair<CrossRankResult::StageSlowRank, std::size_t>> out;
  for (std::size_t i = 0; i < work.size(); ++i) {
    const double peers = others.without(medians[i]);
    if (peers > 0 && medians[i] >= (1 + kMinStageLag) * peers)  // (a stage without own work: none)
      out.push_back({{work[i].rank, stage, medians[i], peers, 0}, i});
  }
  if (out.empty()) return out;
  const std::size_t n = work.front().compute_ms->size();
  for (std::size_t k = 0; k < n; ++k) {
    others.load(work, k);
    for (auto& [r, i] : out) {
      const double v = (*work[i].compute_ms)[k];
      if (v >= kStageAhead * others.without(v)) ++r.ahead;
    }
  }
  std::erase_if(out, [&](const auto& r) { return 4 * r.first.ahead < 3 * n; });
  return out;
}

}  // namespace

const ConfigDifference* pipeline_stage_field(const std::vector<ConfigDifference>& classes) {
  const ConfigDifference* found = nullptr;
  for (const auto& d : classes) {
    if (d.values.size() < 2 || !names_pipeline_stage(d.key)) continue;
    if (d.key == "stage") return &d;  // (the plainest name first)
    if (!found) found = &d;
  }
  return found;
}

void compare_within_stages(const ConfigDifference& field, const std::vector<RankWork>& ranks,
                           const std::vector<UpdateSlowest>& per_update, double threshold, CrossRankResult& out) {
  // Each value's ranks; ranks without the field are in no stage.
  std::vector<std::pair<const std::string*, std::vector<RankWork>>> stages;
  std::size_t values_held = 0;
  for (const auto& [value, members] : field.values) {
    if (value.empty()) continue;
    std::vector<RankWork> work;
    for (const auto& r : ranks)
      if (std::binary_search(members.begin(), members.end(), r.rank)) work.push_back(r);
    if (!work.empty()) ++values_held;
    if (work.size() >= kMinStageRanks) stages.emplace_back(&value, std::move(work));
  }
  const std::size_t n = per_update.size();
  if (values_held < 2 || stages.empty() || n < kMinStragglerUpdates) return;
  out.stage_field = field.key;
  out.stages_compared = stages.size();
  // Per update, the largest own work of any rank and the second largest (the job waits
  // for the slowest rank of every stage), and which rank has the largest.
  std::vector<double> top(n, 0), second(n, 0);
  std::vector<std::int64_t> top_rank(n, -1);
  for (std::size_t k = 0; k < n; ++k)
    for (const auto& r : ranks) {
      const double v = (*r.compute_ms)[k];
      if (top_rank[k] < 0 || v > top[k]) {
        second[k] = top_rank[k] < 0 ? 0.0 : top[k];
        top[k] = v;
        top_rank[k] = r.rank;
      } else if (v > second[k]) {
        second[k] = v;
      }
    }
  // What the job would gain in update k without rank r's lag: its own work beyond every
  // other rank's [ms].
  const auto gain = [&](const RankWork& r, std::size_t k) {
    return std::max(0.0, (*r.compute_ms)[k] - (top_rank[k] == r.rank ? second[k] : top[k]));
  };
  std::unordered_map<std::int64_t, std::size_t> place;  // each rank's place in `ranks`
  for (std::size_t i = 0; i < ranks.size(); ++i) place.emplace(ranks[i].rank, i);
  const auto own_of = [&](std::int64_t rank, std::size_t k) { return (*ranks[place.at(rank)].compute_ms)[k]; };
  const auto update_of = [&](std::int64_t step) {
    return static_cast<std::size_t>(
        std::lower_bound(per_update.begin(), per_update.end(), step,
                         [](const UpdateSlowest& u, std::int64_t s) { return u.step < s; }) -
        per_update.begin());
  };
  std::vector<StragglerEpisode> episodes;
  std::vector<RecurringLag> recurring;
  std::unordered_map<std::int64_t, const std::vector<UpdateSlowest>*> stage_of;  // a rank's stage's updates
  // Each stage with ranks slower than its others throughout: its ranks and their places.
  std::vector<std::pair<const std::vector<RankWork>*, std::vector<std::size_t>>> slow_places;
  // Ranks of stages whose every rank the comparison of every rank flagged (a straggler, or
  // in the slow group): it named them for their stage's work, and its stretches of them
  // say nothing.
  const auto flagged = [&](std::int64_t rank) {
    return std::find(out.stragglers.begin(), out.stragglers.end(), rank) != out.stragglers.end() ||
           (out.slow_group && std::binary_search(out.slow_group->slow.begin(), out.slow_group->slow.end(), rank));
  };
  std::vector<std::int64_t> flagged_for_stage;
  for (const auto& [value, work] : stages)
    if (std::all_of(work.begin(), work.end(), [&](const RankWork& w) { return flagged(w.rank); }))
      for (const auto& w : work) flagged_for_stage.push_back(w.rank);
  std::vector<std::vector<UpdateSlowest>> stage_updates_all;
  stage_updates_all.reserve(stages.size());
  for (const auto& stage : stages) {
    // (Not a structured binding: clang 14, which builds the fuzz targets, cannot capture one.)
    const std::string* value = stage.first;
    const std::vector<RankWork>& work = stage.second;
    std::vector<double> all;
    for (const auto& w : work) all.insert(all.end(), w.compute_ms->begin(), w.compute_ms->end());
    const double stage_ms = *median(all);
    out.stage_own_ms.emplace_back(*value, stage_ms);
    const std::vector<UpdateSlowest>& updates = stage_updates_all.emplace_back(stage_updates(work, per_update));
    for (const auto& w : work) stage_of[w.rank] = &updates;
    // (Not a rank the comparison of every rank flagged for itself: a straggler with no
    // heavier stage about, whose finding says it; but one of a flagged stage, or flagged
    // beside such a stage (the slow-ranks group of a pipeline's heavy stages and a slow GPU
    // of a light one), is said here, on its own.)
    std::vector<std::size_t> places;
    for (auto& [r, i] : slow_in_stage(work, *value))
      if (!flagged(r.rank) || !flagged_for_stage.empty()) {
        out.stage_slow.push_back(std::move(r));
        places.push_back(i);
      }
    if (!places.empty()) slow_places.emplace_back(&work, std::move(places));
    double threshold_ms = 0;
    std::vector<StragglerEpisode> found = find_straggler_episodes(updates, threshold_ms, work);
    std::vector<RecurringLag> lags =
        find_recurring_lags(updates, threshold_ms, work, found, stage_stragglers(work, threshold));
    const auto work_of = [&](std::int64_t rank) {
      return *std::find_if(work.begin(), work.end(), [&](const RankWork& w) { return w.rank == rank; });
    };
    for (auto& e : found) {
      if (e.margin_ms < kMinStageLag * stage_ms || e.behind < kMinStageBehind) continue;
      // (A stretch over half the run or more of a rank slower throughout: that finding's.)
      if (2 * e.updates >= n && std::any_of(out.stage_slow.begin(), out.stage_slow.end(),
                                            [&](const auto& r) { return r.rank == e.rank; }))
        continue;
      e.stage = *value;
      episodes.push_back(std::move(e));
    }
    for (auto& g : lags) {
      if (g.margin_ms < kMinStageLag * stage_ms) continue;
      const RankWork r = work_of(g.rank);
      double stake = 0;
      for (std::size_t j = 0; j < g.behind_steps.size(); ++j) {
        g.stake_ms[j] = gain(r, update_of(g.behind_steps[j]));
        stake += g.stake_ms[j];
      }
      g.at_stake_ms = stake / static_cast<double>(n);
      g.stage = *value;
      recurring.push_back(std::move(g));
    }
  }
  // A stage's stretch replaces the comparison of every rank's stretches of the same rank
  // that overlap it (their margins were against the median rank of every stage), unless
  // it covers under half of the steps of one of them (the longer one stays: a noisy peer
  // can cut a stage's stretch short) and the rank's stage is not all flagged (then that
  // one is the stage's work: each rank of a heavy stage behind over the whole run).
  const auto overlap = [](const StragglerEpisode& a, const StragglerEpisode& b) {
    return a.rank == b.rank && a.first_step <= b.last_step && b.first_step <= a.last_step;
  };
  std::erase_if(episodes, [&](const StragglerEpisode& e) {
    if (std::find(flagged_for_stage.begin(), flagged_for_stage.end(), e.rank) != flagged_for_stage.end()) return false;
    return std::any_of(out.episodes.begin(), out.episodes.end(), [&](const StragglerEpisode& o) {
      if (!overlap(o, e)) return false;
      const std::int64_t common = std::min(o.last_step, e.last_step) - std::max(o.first_step, e.first_step) + 1;
      return 2 * common < o.last_step - o.first_step + 1;
    });
  });
  std::erase_if(out.episodes, [&](const StragglerEpisode& o) {
    return std::any_of(episodes.begin(), episodes.end(), [&](const StragglerEpisode& e) { return overlap(o, e); });
  });
  // Their price: in each update, what the job gains with every stretch's rank there at its
  // stage's median rank (a slow node holds a rank of every stage: removing one lag alone
  // gains nothing while another stage's rank of the node is as slow), shared among them
  // in proportion to their own work beyond the rest.
  for (auto& e : episodes) e.excess_ms = 0;
  std::vector<std::size_t> covering;
  std::vector<char> in_set(ranks.size(), 0);  // (by place: the ranks of `covering`)
  for (std::size_t k = 0; k < n; ++k) {
    for (const std::size_t i : covering) in_set[place.at(episodes[i].rank)] = 0;
    covering.clear();
    for (std::size_t i = 0; i < episodes.size(); ++i)
      if (episodes[i].first_step <= per_update[k].step && per_update[k].step <= episodes[i].last_step) covering.push_back(i);
    if (covering.empty()) continue;
    for (const std::size_t i : covering) in_set[place.at(episodes[i].rank)] = 1;
    double rest = 0;  // the slowest own work without their lags
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const double v = (*ranks[i].compute_ms)[k];
      rest = std::max(rest, in_set[i] ? std::min(v, (*stage_of.at(ranks[i].rank))[k].median_compute_ms) : v);
    }
    const double gain_k = std::max(0.0, top[k] - rest);
    double weights = 0;
    for (const std::size_t i : covering) weights += std::max(0.0, own_of(episodes[i].rank, k) - rest);
    if (gain_k <= 0 || weights <= 0) continue;
    for (const std::size_t i : covering)
      episodes[i].excess_ms += gain_k * std::max(0.0, own_of(episodes[i].rank, k) - rest) / weights;
  }
  // The slow ranks' price: the job's slowest own work less the slowest with each of them
  // at its stage's other ranks' median.
  if (!out.stage_slow.empty()) {
    std::vector<char> slow(ranks.size(), 0);
    for (const auto& r : out.stage_slow) slow[place.at(r.rank)] = 1;
    OthersMedian others;
    double gained = 0;
    for (std::size_t k = 0; k < n; ++k) {
      double rest = 0;
      for (std::size_t i = 0; i < ranks.size(); ++i)
        if (!slow[i]) rest = std::max(rest, (*ranks[i].compute_ms)[k]);
      for (const auto& [work, places] : slow_places) {
        others.load(*work, k);
        for (const std::size_t i : places) {
          const double v = (*(*work)[i].compute_ms)[k];
          rest = std::max(rest, std::min(v, others.without(v)));
        }
      }
      gained += std::max(0.0, top[k] - rest);
    }
    out.stage_slow_at_stake_ms = gained / static_cast<double>(n);
  }
  out.episodes.insert(out.episodes.end(), episodes.begin(), episodes.end());
  std::stable_sort(out.episodes.begin(), out.episodes.end(), [](const StragglerEpisode& a, const StragglerEpisode& b) {
    return std::tie(a.first_step, a.rank) < std::tie(b.first_step, b.rank);
  });
  // A rank's lag in scattered updates that the comparison of every rank found stays (its
  // period too: a stage's bounds, nearer, take in an update or two more).
  for (auto& g : recurring)
    if (std::none_of(out.recurring.begin(), out.recurring.end(), [&](const RecurringLag& o) { return o.rank == g.rank; }))
      out.recurring.push_back(std::move(g));
  std::stable_sort(out.recurring.begin(), out.recurring.end(),
                   [](const RecurringLag& a, const RecurringLag& b) { return a.at_stake_ms > b.at_stake_ms; });
}

}  // namespace stepprof
