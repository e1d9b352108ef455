#include "stepprof/analysis/stage_peers.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <tuple>

#include "stepprof/analysis/stats.hpp"

namespace stepprof {
namespace {

bool names_pipeline_stage(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view k = key;
  return k == "stage" || k == "stage_id" || k == "pp" || k.starts_with("pp_") || k.starts_with("pipeline") ||
         k.ends_with("_stage");
}

// One stage's aligned updates as find_straggler_episodes reads them: its slowest rank and
// its median rank (of two ranks, the faster one: the other waited the whole gap, which
// the margins then are).
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
    const double mid = v.size() == 2 ? others.front() : *median(v);
    out.push_back({per_update[k].step, work[slow].rank, slowest, mid, slowest - mid, per_update[k].update_ms,
                   others_median});
  }
  return out;
}

// The stage's ranks whose median own work is below `threshold` x its fastest rank's: its
// stragglers, which find_recurring_lags leaves out (as analyze_cross_rank does).
std::vector<std::int64_t> stage_stragglers(const std::vector<RankWork>& work, double threshold) {
  std::vector<double> medians;
  for (const auto& w : work) {
    std::vector<double> c = *w.compute_ms;
    medians.push_back(median(c).value_or(0));
  }
  const double fastest = *std::min_element(medians.begin(), medians.end());
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < work.size(); ++i)
    if (medians[i] > 0 && fastest / medians[i] < threshold) out.push_back(work[i].rank);
  return out;
}

}  // namespace

const ConfigDifference* pipeline_stage_field(const std::vector<ConfigDifference>& classes) {
  for (const auto& d : classes)
    if (d.values.size() >= 2 && names_pipeline_stage(d.key)) return &d;
  return nullptr;
}

void compare_within_stages(const ConfigDifference& field, const std::vector<RankWork>& ranks,
                           const std::vector<UpdateSlowest>& per_update, double threshold, CrossRankResult& out) {
  // Each value's ranks (their places in `ranks`); ranks without the field are in no stage.
  std::vector<std::pair<const std::string*, std::vector<RankWork>>> stages;
  std::size_t values_held = 0;
  for (const auto& [value, members] : field.values) {
    if (value.empty()) continue;
    std::vector<RankWork> work;
    for (const auto& r : ranks)
      if (std::binary_search(members.begin(), members.end(), r.rank)) work.push_back(r);
    if (!work.empty()) ++values_held;
    if (work.size() >= 2) stages.emplace_back(&value, std::move(work));
  }
  if (values_held < 2 || stages.empty() || per_update.size() < kMinStragglerUpdates) return;
  out.stage_field = field.key;
  out.stages_compared = stages.size();
  std::vector<StragglerEpisode> episodes;
  std::vector<RecurringLag> recurring;
  for (const auto& [value, work] : stages) {
    std::vector<double> all;
    for (const auto& w : work) all.insert(all.end(), w.compute_ms->begin(), w.compute_ms->end());
    out.stage_own_ms.emplace_back(*value, *median(all));
    const std::vector<UpdateSlowest> updates = stage_updates(work, per_update);
    double threshold_ms = 0;
    std::vector<StragglerEpisode> found = find_straggler_episodes(updates, threshold_ms, work);
    std::vector<RecurringLag> lags =
        find_recurring_lags(updates, threshold_ms, work, found, stage_stragglers(work, threshold));
    for (auto& e : found) {
      e.stage = *value;
      episodes.push_back(std::move(e));
    }
    for (auto& g : lags) {
      g.stage = *value;
      recurring.push_back(std::move(g));
    }
  }
  // What the comparison of every rank found of a rank that its stage's comparison found
  // there too is replaced: its margins were against the median rank of every stage.
  std::erase_if(out.episodes, [&](const StragglerEpisode& o) {
    return std::any_of(episodes.begin(), episodes.end(), [&](const StragglerEpisode& e) {
      return o.rank == e.rank && o.first_step <= e.last_step && e.first_step <= o.last_step;
    });
  });
  std::erase_if(out.recurring, [&](const RecurringLag& o) {
    return std::any_of(recurring.begin(), recurring.end(), [&](const RecurringLag& g) { return o.rank == g.rank; });
  });
  out.episodes.insert(out.episodes.end(), episodes.begin(), episodes.end());
  std::stable_sort(out.episodes.begin(), out.episodes.end(), [](const StragglerEpisode& a, const StragglerEpisode& b) {
    return std::tie(a.first_step, a.rank) < std::tie(b.first_step, b.rank);
  });
  out.recurring.insert(out.recurring.end(), recurring.begin(), recurring.end());
  std::stable_sort(out.recurring.begin(), out.recurring.end(),
                   [](const RecurringLag& a, const RecurringLag& b) { return a.at_stake_ms > b.at_stake_ms; });
}

}  // namespace stepprof
