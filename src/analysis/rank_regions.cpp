#include "stepprof/analysis/rank_regions.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "stepprof/analysis/stats.hpp"
#include "stepprof/analysis/waiting.hpp"
#include "stepprof/hierarchy.hpp"

namespace stepprof {

RankRegionTimes::RankRegionTimes(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                                 std::string_view comm_region)
    : h_(in.hierarchy) {
  if (!h_) return;
  const Hierarchy& h = *h_;
  for (const auto& r : in.data.ranks) {
    if (!r.rank || r.updates.empty()) continue;
    const auto first = in.first_update_of(r);
    if (!first) continue;
    ranks_.push_back(*r.rank);
    ranges_.emplace_back(*first, *first + r.updates.size());
  }
  const std::size_t nodes = h.nodes().size();
  // Waiting is not work: a communication region, a collective call (is_collective_call) or
  // one inside either; each is taken out of its parent's time. (On a trace, device times
  // are busy time summed per stream, and a collective's kernels run on their own streams:
  // the parent's time less the collective's is the busy time of its other streams.) Work
  // on another thread alongside the update (background) is neither work of the update nor
  // subtracted.
  auto waits = [&](const HierarchyNode& n) {
    if (!comm_region.empty() && (n.name == comm_region || h.is_ancestor(comm_region, n.name))) return true;
    for (const HierarchyNode* a = &n; a; a = a->parent.empty() ? nullptr : h.find(a->parent))
      if (a->role == RegionRole::kCommunication || is_collective_call(a->name)) return true;
    return false;
  };
  auto background = [&](const HierarchyNode& n) { return n.role == RegionRole::kBackground || h.in_background(n.name); };
  std::vector<std::optional<NameTable::Id>> ids(nodes);
  std::vector<bool> device(nodes, false);
  work_.assign(nodes, false);
  for (std::size_t n = 0; n < nodes; ++n) {
    const HierarchyNode& node = h.nodes()[n];
    ids[n] = in.data.regions.find(node.name);
    if (ids[n]) device[n] = in.has_device_time(*ids[n]);
    work_[n] = ids[n] && !waits(node) && !background(node);
  }
  // A region's time in an update: device time where the update has one, else host time
  // (a rank with device timing off), 0 where absent (a path not taken).
  auto time_of = [&](std::size_t n, std::size_t k) {
    if (!ids[n]) return 0.0;
    auto ms = in.region_ms_of(k, *updates[k], *ids[n], device[n]);
    if (!ms && device[n]) ms = in.region_ms_of(k, *updates[k], *ids[n], false);
    return ms.value_or(0.0);
  };
  // Per work region: its children that are waits (the outermost waiting regions it
  // holds: a micro-step around its all-reduce is measured without it, or a straggler's
  // extra work is cancelled by the other ranks' longer wait) and that are work. A child
  // the log never has (a wrapper of the nesting file) is no level: its children are the
  // region's (they were their own top level, and the region's self time held them: a
  // review).
  std::vector<std::vector<std::size_t>> wait_children(nodes);
  work_children_.assign(nodes, {});
  under_work_.assign(nodes, false);
  for (std::size_t n = 0; n < nodes; ++n) {
    if (!work_[n]) continue;
    std::vector<const HierarchyNode*> todo;
    auto push = [&](const std::string& of) {
      const auto kids = h.children(of);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back(*it);
    };
    push(h.nodes()[n].name);
    while (!todo.empty()) {
      const HierarchyNode* c = todo.back();
      todo.pop_back();
      const auto ci = static_cast<std::size_t>(c - h.nodes().data());
      if (work_[ci]) {
        work_children_[n].push_back(ci);
        under_work_[ci] = true;
      } else if (ids[ci] && waits(*c)) {
        wait_children[n].push_back(ci);
      } else if (!ids[ci] && !background(*c)) {
        push(c->name);
      }
    }
  }
  // Its time without the waits inside it (inclusive) and without its work children
  // (self): inclusive(n) = t(n) - sum of its wait children's t - sum over its work
  // children of their waits, found recursively; computed per update in that order.
  inclusive_.assign(nodes, {});
  self_.assign(nodes, {});
  std::vector<double> incl(nodes), values;
  std::vector<std::vector<double>> incl_values(nodes), self_values(nodes);
  // (Children before parents: deeper nodes first.)
  std::vector<std::size_t> order;
  for (std::size_t n = 0; n < nodes; ++n)
    if (work_[n]) order.push_back(n);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return h.depth(h.nodes()[a].name) > h.depth(h.nodes()[b].name);
  });
  for (const auto& [begin, end] : ranges_) {
    for (const std::size_t n : order) {
      incl_values[n].clear();
      self_values[n].clear();
    }
    for (std::size_t k = begin; k < end; ++k)
      for (const std::size_t n : order) {
        double t = time_of(n, k), waited = 0, children = 0;
        for (const std::size_t w : wait_children[n]) waited += time_of(w, k);
        for (const std::size_t c : work_children_[n]) {
          children += incl[c];
          waited += time_of(c, k) - incl[c];  // (the waits inside that child)
        }
        incl[n] = t - waited;
        incl_values[n].push_back(incl[n]);
        self_values[n].push_back(incl[n] - children);
      }
    for (const std::size_t n : order) {
      inclusive_[n].push_back(median(incl_values[n]).value_or(0.0));
      self_[n].push_back(median(self_values[n]).value_or(0.0));
    }
  }
}

std::optional<std::size_t> RankRegionTimes::place_of(std::int64_t rank) const {
  const auto at = std::find(ranks_.begin(), ranks_.end(), rank);
  if (at == ranks_.end()) return std::nullopt;
  return static_cast<std::size_t>(at - ranks_.begin());
}

double RankRegionTimes::others(const std::vector<double>& per_rank, std::size_t self) const {
  std::vector<double> v;
  v.reserve(per_rank.size());
  for (std::size_t i = 0; i < per_rank.size(); ++i)
    if (i != self) v.push_back(per_rank[i]);
  return median(v).value_or(0.0);
}

RankLag RankRegionTimes::lag_of(std::int64_t rank, double lag_ms, std::size_t max) const {
  RankLag out;
  const auto me = place_of(rank);
  if (!h_ || !me || ranks_.size() < 2 || !(lag_ms > 0)) return out;
  const Hierarchy& h = *h_;
  const std::size_t nodes = h.nodes().size();
  std::vector<double> rank_ms(nodes, 0), others_ms(nodes, 0);
  double rank_self = 0, others_self = 0;
  std::vector<std::pair<double, double>> selfs;  // (others', the rank's) self medians
  for (std::size_t n = 0; n < nodes; ++n) {
    if (!work_[n] || inclusive_[n].empty()) continue;
    rank_ms[n] = inclusive_[n][*me];
    others_ms[n] = others(inclusive_[n], *me);
    const double rs = self_[n][*me], os = others(self_[n], *me);
    rank_self += rs;
    others_self += os;
    selfs.emplace_back(os, rs);
  }
  auto gap = [&](std::size_t n) { return rank_ms[n] - others_ms[n]; };
  auto has = [&](std::size_t n) { return work_[n] && !inclusive_[n].empty(); };

  // Slower in proportion: the regions holding 80 % of the other ranks' time (self times,
  // largest first), and at least two of them, each have an excess over the other ranks'
  // (its ratio to them less 1) within half of the rank's overall excess either way. Two or
  // more: where one region holds that much, the lag is in it (a job timing one compute
  // region besides its all-reduce was told "slower in proportion, region by region"), and
  // the walk below names it. Against the excess, not the ratio: with a lag of 12 %, every
  // region at 1.00x was within 20 % of the ratio 1.12, and a lag all in one small region
  // was called proportional (found by a review).
  if (others_self > 0 && rank_self > others_self) {
    const double overall = rank_self / others_self;
    std::sort(selfs.begin(), selfs.end(), std::greater<>());
    double covered = 0;
    bool all_near = true;
    std::size_t regions = 0;
    for (const auto& [os, rs] : selfs) {
      if (covered >= 0.8 * others_self && regions >= 2) break;
      if (os <= 0 || std::abs((rs / os - 1) / (overall - 1) - 1) >= 0.5) {
        all_near = false;
        break;
      }
      covered += os;
      ++regions;
    }
    out.proportional = all_near && covered >= 0.8 * others_self && regions >= 2;
    out.ratio = overall;
  }

  // From each region not below a region of work (a top-level region, or one under a
  // waiting region), down while one child holds half the gap.
  for (std::size_t n = 0; n < nodes; ++n) {
    if (!has(n) || gap(n) < kLagShare * lag_ms) continue;
    if (under_work_[n]) continue;
    std::size_t at = n;
    for (;;) {
      std::optional<std::size_t> best;
      for (const std::size_t c : work_children_[at])
        if (has(c) && (!best || gap(c) > gap(*best))) best = c;
      if (!best || gap(*best) < 0.5 * gap(at)) break;
      at = *best;
    }
    RegionLag lag{h.nodes()[at].name, rank_ms[at], others_ms[at], 0, true};
    double children = 0;
    for (const std::size_t c : work_children_[at])
      if (has(c)) {
        lag.leaf = false;
        children += std::max(0.0, gap(c));
      }
    if (!lag.leaf) lag.outside_children_ms = std::max(0.0, gap(at) - children);
    out.regions.push_back(std::move(lag));
  }
  std::sort(out.regions.begin(), out.regions.end(), [](const RegionLag& a, const RegionLag& b) {
    return a.rank_ms - a.others_ms > b.rank_ms - b.others_ms;
  });
  if (out.regions.size() > max) out.regions.resize(max);
  return out;
}

}  // namespace stepprof
