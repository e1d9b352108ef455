#include "stepprof/analysis/slow_updates.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "stepprof/analysis/stats.hpp"

namespace stepprof {
namespace {

constexpr std::size_t kMinSteps = 10;
constexpr std::size_t kMostRegions = 3;

double median_or_zero(std::vector<double> v) { return median(v).value_or(0.0); }

// SlowUpdates::left_out_rank: of the ranks the comparison left out for a short log, the
// one whose own work grew in the slow steps (`steps`, ascending) it holds. Its margin per
// step (own work less the compared ranks' median own work, CrossRankResult::per_update)
// in the slow steps against its margin in the other steps it holds (0 without any): its
// own median would not do, a late rank's log can be mostly its slow stretch.
std::optional<SlowUpdates::LeftOutRank> left_out_setter(const AnalysisInput& in, const CrossRankResult& cross,
                                                        const std::vector<std::int64_t>& steps, double wall_grew) {
  const auto comm = in.region(cross.comm_region);
  if (cross.ranks_short.empty() || !comm) return std::nullopt;
  const bool dev = in.has_device_time(*comm);
  std::map<std::int64_t, double> median_own;  // step -> the compared ranks' median own work [ms]
  for (const auto& p : cross.per_update) median_own[p.step] = p.median_compute_ms;
  std::optional<SlowUpdates::LeftOutRank> best;
  for (const auto& log : in.data.ranks) {
    if (!log.rank || std::none_of(cross.ranks_short.begin(), cross.ranks_short.end(),
                                  [&](const auto& r) { return r.first == *log.rank; }))
      continue;
    const auto first = in.first_update_of(log);
    std::vector<double> usual, slow;  // its margins in the other steps and in the slow ones
    std::vector<double> own;
    for (std::size_t j = 0; j < log.updates.size(); ++j) {
      const UpdateRecord& u = log.updates[j];
      const auto m = median_own.find(u.step);
      if (m == median_own.end()) continue;
      const OwnWork w = own_work(in, log, first, j, comm, dev);
      if (w.kind != OwnWork::Kind::kKnown) continue;
      own.push_back(w.ms);
      (std::binary_search(steps.begin(), steps.end(), u.step) ? slow : usual).push_back(w.ms - m->second);
    }
    if (slow.size() < 2 || 2 * slow.size() < steps.size()) continue;
    const double typical = usual.empty() ? 0.0 : median_or_zero(usual);
    const double band = std::max(usual.size() >= 3 ? 3 * robust_sd(usual, typical) : 0.0, 0.05 * median_or_zero(own));
    const double grew = median_or_zero(slow) - typical;
    if (grew > band && grew >= 0.5 * wall_grew && (!best || grew > best->grew_ms))
      best = SlowUpdates::LeftOutRank{*log.rank, slow.size(), grew};
  }
  return best;
}

// The slow steps' update times, in the order of SlowUpdates::steps [ms].
std::vector<double> slow_walls_in_order(const std::vector<const UpdateRecord*>& updates,
                                        const std::map<std::int64_t, std::size_t>& slowest, const SlowUpdates& out) {
  std::vector<double> v;
  for (const std::int64_t step : out.steps) v.push_back(updates[slowest.at(step)]->wall_ms);
  return v;
}

// SlowUpdates::other_causes. `growth[id]` as computed (typical_ms its median over every
// step; empty region name: left out), `at_slow[id][j]` its time in the j-th slow step,
// `walls[j]` that step's update time.
std::vector<SlowUpdates::OtherCause> other_causes(const AnalysisInput& in, const std::vector<RegionGrowth>& growth,
                                                   const std::vector<std::vector<double>>& at_slow,
                                                   const std::vector<double>& walls, const SlowUpdates& out) {
  constexpr std::size_t kMostCauses = 2;
  const std::size_t n = walls.size();
  std::map<NameTable::Id, std::vector<std::size_t>> steps_of;  // region -> slow steps (j) it explains
  for (std::size_t j = 0; j < n; ++j) {
    const auto grew_at = [&](NameTable::Id id) { return at_slow[id].empty() ? 0.0 : at_slow[id][j] - growth[id].typical_ms; };
    std::optional<NameTable::Id> top;
    for (NameTable::Id id = 0; id < growth.size(); ++id)
      if (!at_slow[id].empty() && (!top || grew_at(id) > grew_at(*top))) top = id;
    if (!top) break;
    NameTable::Id at = *top;
    for (bool deeper = in.hierarchy != nullptr; deeper;) {
      deeper = false;
      for (const auto* child : in.children_in_log(growth[at].region))
        if (const auto id = in.region(child->name); id && grew_at(*id) >= 0.5 * grew_at(at)) {
          at = *id;
          deeper = true;
          break;
        }
    }
    if (grew_at(*top) >= 0.5 * (walls[j] - out.typical_ms) && walls[j] > out.typical_ms) steps_of[at].push_back(j);
  }
  const auto related = [&](const std::string& a, const std::string& b) {
    return a == b || (in.hierarchy && (in.hierarchy->is_ancestor(a, b) || in.hierarchy->is_ancestor(b, a)));
  };
  std::vector<SlowUpdates::OtherCause> causes;
  for (const auto& entry : steps_of) {  // (no structured binding: clang 14 cannot capture one)
    const NameTable::Id id = entry.first;
    const std::vector<std::size_t>& js = entry.second;
    if (js.size() < 2 || 10 * js.size() < n) continue;
    if (std::any_of(out.grew.begin(), out.grew.end(),
                    [&](const RegionGrowth& g) { return related(g.region, growth[id].region); }))
      continue;
    SlowUpdates::OtherCause c;
    c.region = growth[id].region;
    std::vector<double> g;
    for (const std::size_t j : js) {
      c.steps.push_back(out.steps[j]);
      g.push_back(at_slow[id][j] - growth[id].typical_ms);
    }
    c.grew_ms = median_or_zero(g);
    causes.push_back(std::move(c));
  }
  std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.steps.size() > b.steps.size(); });
  if (causes.size() > kMostCauses) causes.resize(kMostCauses);
  return causes;
}

}  // namespace

std::optional<SlowUpdates> analyze_slow_updates(const AnalysisInput& in, const CrossRankResult* cross) {
  // Per step, the update of the slowest rank (positions in updates() order).
  const auto updates = in.updates();
  std::map<std::int64_t, std::size_t> slowest;  // step -> k
  for (std::size_t k = 0; k < updates.size(); ++k) {
    auto [it, inserted] = slowest.try_emplace(updates[k]->step, k);
    if (!inserted && updates[k]->wall_ms > updates[it->second]->wall_ms) it->second = k;
  }
  if (slowest.size() < kMinSteps) return std::nullopt;
  // Per step, the update whose regions are compared: the rank with the most own work where
  // the ranks were compared by it, else the longest update.
  std::map<std::int64_t, std::int64_t> setter;  // step -> rank
  if (cross && cross->available && !cross->comm_region.empty())
    for (const auto& p : cross->per_update) setter[p.step] = p.slowest_rank;
  std::map<std::int64_t, std::size_t> compared = slowest;  // step -> k
  if (!setter.empty())
    for (std::size_t k = 0; k < updates.size(); ++k) {
      const auto it = setter.find(updates[k]->step);
      if (it != setter.end() && updates[k]->rank == it->second) compared[it->first] = k;
    }
  std::vector<double> walls;
  for (const auto& [step, k] : slowest) walls.push_back(updates[k]->wall_ms);
  const auto time = summarize(walls);
  SlowUpdates out;
  out.typical_ms = time->median;
  // Slow: beyond the median by more than 3 robust standard deviations (1.4826 x the median
  // absolute deviation) and 10 % of the median; when no
  // update is that far out (a wide spread rather than outliers), above the p90.
  out.threshold_ms = time->median + std::max(3 * robust_sd(walls, time->median), 0.1 * time->median);
  if (time->max <= out.threshold_ms) out.threshold_ms = time->p90;
  for (const auto& [step, k] : slowest)
    if (updates[k]->wall_ms > out.threshold_ms) out.steps.push_back(step);
  if (out.steps.empty()) return std::nullopt;
  // With the ranks compared by own work: did the rank with the most own work have more
  // than usual in the slow steps? If not, no rank given made them slow (every rank
  // waited: for a rank without a log, one that stopped, or a slow collective), and the
  // longest updates' regions say where the time went. And did every rank's grow?
  if (!setter.empty()) {
    std::vector<double> most_all, most_slow, median_all, median_slow, others_all, others_slow, setter_grew;
    std::map<std::int64_t, double> own_median;  // rank -> its median own work [ms]
    for (const auto& r : cross->per_rank) own_median[r.rank] = r.compute_ms.median;
    for (const auto& p : cross->per_update) {
      most_all.push_back(p.slowest_compute_ms);
      median_all.push_back(p.median_compute_ms);
      others_all.push_back(p.others_median_compute_ms);
      if (std::binary_search(out.steps.begin(), out.steps.end(), p.step)) {
        most_slow.push_back(p.slowest_compute_ms);
        median_slow.push_back(p.median_compute_ms);
        others_slow.push_back(p.others_median_compute_ms);
        if (const auto it = own_median.find(p.slowest_rank); it != own_median.end())
          setter_grew.push_back(p.slowest_compute_ms - it->second);
      }
    }
    if (!most_slow.empty()) {
      // Each within its median plus the larger of 3 robust standard deviations and 5 %.
      // Both must stay there: where one rank's slow path makes the most own work vary
      // widely (fallbacks), every rank's own work grew 1.9 s in the slow steps, the most
      // only within its wide band, and "every rank waited (the network)" was said.
      const double typical = median_or_zero(most_all), typical_median = median_or_zero(median_all);
      const double band = std::max(3 * robust_sd(most_all, typical), 0.05 * typical);
      const double median_band = std::max(3 * robust_sd(median_all, typical_median), 0.05 * typical_median);
      out.most_own_work_grew_ms = median_or_zero(most_slow) - typical;
      out.median_own_work_grew_ms = median_or_zero(median_slow) - typical_median;
      out.others_own_work_grew_ms = median_or_zero(others_slow) - median_or_zero(others_all);
      // And the most own work must not explain half the slow steps' extra time (their
      // median update time less every step's): with a wide spread and no outliers (the
      // p90 is the threshold), the slowest steps are those of the most own work, and its
      // growth stays within a band that spread widens.
      std::vector<double> slow_walls;
      for (const std::int64_t step : out.steps) slow_walls.push_back(updates[slowest.at(step)]->wall_ms);
      const double wall_grew = median_or_zero(slow_walls) - time->median;
      // Nor may the rank with the most own work in each slow step have done half the extra
      // time beyond its own median: where many steps have some slow rank (padding spikes
      // on different ranks of a large job), the most own work is high in most steps, and
      // a step's setter 7.4 s above its own median, 3.2 s above that typical most, was
      // "every rank waited".
      const double setter_grew_ms = median_or_zero(setter_grew);
      if (!(out.most_own_work_grew_ms > band) && !(out.median_own_work_grew_ms > median_band) &&
          !(out.most_own_work_grew_ms >= 0.5 * wall_grew) && !(setter_grew_ms >= 0.5 * wall_grew)) {
        out.own_work_typical = true;
        setter.clear();
        compared = slowest;
        out.left_out_rank = left_out_setter(in, *cross, out.steps, wall_grew);
      }
    }
  }
  std::vector<std::size_t> all, slow;  // positions in updates() of the compared updates
  std::vector<double> slow_walls;
  std::map<std::int64_t, std::size_t> set_by;  // rank -> slow steps it set
  for (const auto& [step, k] : slowest) {
    all.push_back(compared[step]);
    if (updates[k]->wall_ms > out.threshold_ms) {
      slow.push_back(compared[step]);
      if (const auto it = setter.find(step); it != setter.end()) {
        ++set_by[it->second];
        out.by_own_work = true;  // (some slow step was compared by own work)
      }
      slow_walls.push_back(updates[k]->wall_ms);
      out.excess_ms_per_update += updates[k]->wall_ms - out.typical_ms;
    }
  }
  out.excess_ms_per_update /= static_cast<double>(all.size());
  out.slow_ms = median_or_zero(slow_walls);
  out.setters.assign(set_by.begin(), set_by.end());
  for (const auto& [rank, n] : set_by)  // (the lowest rank on a tie)
    if (n > out.set_by_steps) {
      out.set_by_rank = rank;
      out.set_by_steps = n;
    }

  // Every region's median over the slow steps against every step; background regions are
  // left out (marked as not grown).
  std::vector<RegionGrowth> growth(in.data.regions.size());
  std::vector<bool> grew(in.data.regions.size(), false);
  // [id][j]: its time in the j-th slow update; empty for a region that cannot be a cause
  std::vector<std::vector<double>> at_slow(in.data.regions.size());
  for (NameTable::Id id = 0; id < in.data.regions.size(); ++id) {
    // A background region (another thread) grows with the update's length, not into it.
    if (in.hierarchy && in.hierarchy->in_background(in.data.regions.name(id))) continue;
    const RegionColumns columns(in, updates, id);
    const auto& c = columns.get();
    const bool device = in.has_device_time(id);
    auto value = [&](std::size_t k) {
      const double v = device ? c.device[k] : c.host[k];
      return std::isnan(v) ? 0.0 : v;
    };
    std::vector<double> s, a;
    for (const auto k : slow) s.push_back(value(k));
    for (const auto k : all) a.push_back(value(k));
    growth[id] = {std::string(in.data.regions.name(id)), median_or_zero(s), median_or_zero(a)};
    // Kept for other_causes only where the region could be a step's cause there: growth of
    // a quarter of the step's excess at least (a cause holds half, a child followed down
    // half of its parent's). A name per step kept 40,000 regions x 4,000 slow steps (1.3 GB).
    for (std::size_t j = 0; j < s.size(); ++j)
      if (s[j] - growth[id].typical_ms >= 0.25 * (slow_walls[j] - out.typical_ms) && slow_walls[j] > out.typical_ms) {
        at_slow[id] = s;
        break;
      }
    grew[id] = growth[id].grew_ms() > 0;
  }
  // Largest growth first; from each, down the nesting while a child holds half of it.
  std::vector<NameTable::Id> order;
  for (NameTable::Id id = 0; id < growth.size(); ++id)
    if (grew[id]) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](NameTable::Id a, NameTable::Id b) { return growth[a].grew_ms() > growth[b].grew_ms(); });
  std::vector<bool> used(growth.size(), false);
  // Growth under a tenth of the slow steps' excess explains little: not listed.
  const double least = 0.1 * (out.slow_ms - out.typical_ms);
  for (const NameTable::Id top : order) {
    if (out.grew.size() >= kMostRegions || growth[top].grew_ms() < least) break;
    if (used[top]) continue;
    NameTable::Id at = top;
    used[at] = true;
    for (bool deeper = in.hierarchy != nullptr; deeper;) {
      deeper = false;
      for (const auto* child : in.children_in_log(growth[at].region)) {
        const auto id = in.region(child->name);
        if (!id || !grew[*id] || growth[*id].grew_ms() < 0.5 * growth[at].grew_ms()) continue;
        out.grew.push_back(growth[at]);  // the parent, then the child that explains it
        at = *id;
        used[at] = true;
        deeper = true;
        break;
      }
    }
    out.grew.push_back(growth[at]);
    if (out.first_chain == 0) out.first_chain = std::min(out.grew.size(), kMostRegions);
    // Regions above or below a chosen one say the same again.
    if (in.hierarchy)
      for (const NameTable::Id other : order)
        if (in.hierarchy->is_ancestor(growth[other].region, growth[at].region) ||
            in.hierarchy->is_ancestor(growth[at].region, growth[other].region))
          used[other] = true;
  }
  if (out.grew.size() > kMostRegions) out.grew.resize(kMostRegions);
  out.steps_ms = slow_walls_in_order(updates, slowest, out);
  out.other_causes = other_causes(in, growth, at_slow, out.steps_ms, out);
  return out;
}

}  // namespace stepprof
