#include "stepprof/analysis/rank_regions.hpp"

#include <algorithm>
#include <optional>

#include "stepprof/analysis/stats.hpp"
#include "stepprof/hierarchy.hpp"

namespace stepprof {

std::vector<RegionLag> where_rank_lags(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                                       std::int64_t rank, std::string_view comm_region, double lag_ms,
                                       std::size_t max) {
  std::vector<RegionLag> out;
  const Hierarchy* h = in.hierarchy;
  if (!h || !(lag_ms > 0)) return out;
  // Each rank's range of updates (updates() holds data.ranks' updates in order).
  struct Range {
    std::size_t begin, end;
    bool self;
  };
  std::vector<Range> ranges;
  bool found = false;
  for (const auto& r : in.data.ranks) {
    if (!r.rank || r.updates.empty()) continue;
    const auto first = in.first_update_of(r);
    if (!first) continue;
    ranges.push_back({*first, *first + r.updates.size(), *r.rank == rank});
    found = found || *r.rank == rank;
  }
  if (!found || ranges.size() < 2) return out;

  // The rank's median time and the other ranks' median of medians, per region of work.
  // (Waiting is not work: a communication region or one inside it; nor is work on another
  // thread alongside the update.)
  auto is_work = [&](const HierarchyNode& n) {
    if (!comm_region.empty() && (n.name == comm_region || h->is_ancestor(comm_region, n.name))) return false;
    for (const HierarchyNode* a = &n; a; a = a->parent.empty() ? nullptr : h->find(a->parent))
      if (a->role == RegionRole::kCommunication || a->role == RegionRole::kBackground) return false;
    return true;
  };
  // The outermost waiting regions: a region that holds one (a micro-step around its
  // all-reduce) is measured without it, or the straggler's extra work would be cancelled
  // by the other ranks' longer wait inside it.
  std::vector<NameTable::Id> waits;
  std::vector<std::string_view> wait_names;
  for (const HierarchyNode& n : h->nodes()) {
    if (is_work(n)) continue;
    const HierarchyNode* p = n.parent.empty() ? nullptr : h->find(n.parent);
    if (p && !is_work(*p)) continue;  // inside an outer waiting region
    if (const auto id = in.data.regions.find(n.name)) {
      waits.push_back(*id);
      wait_names.push_back(n.name);
    }
  }
  struct Diff {
    double rank_ms, others_ms;
  };
  std::vector<std::optional<Diff>> diff(h->nodes().size());
  std::vector<double> values, medians;
  for (std::size_t n = 0; n < h->nodes().size(); ++n) {
    const HierarchyNode& node = h->nodes()[n];
    if (!is_work(node)) continue;
    const auto id = in.data.regions.find(node.name);
    if (!id) continue;
    const bool device = in.has_device_time(*id);
    std::vector<std::pair<NameTable::Id, bool>> inside;  // the waiting regions it holds
    for (std::size_t w = 0; w < waits.size(); ++w)
      if (h->is_ancestor(node.name, wait_names[w])) inside.emplace_back(waits[w], in.has_device_time(waits[w]));
    double own = 0;
    medians.clear();
    for (const Range& r : ranges) {
      values.clear();
      for (std::size_t k = r.begin; k < r.end; ++k) {
        double t = in.region_ms_of(k, *updates[k], *id, device).value_or(0.0);
        for (const auto& [w, w_device] : inside) t -= in.region_ms_of(k, *updates[k], w, w_device).value_or(0.0);
        values.push_back(t);
      }
      const double m = median(values).value_or(0.0);
      if (r.self)
        own = m;
      else
        medians.push_back(m);
    }
    diff[n] = Diff{own, median(medians).value_or(0.0)};
  }
  auto gap = [&](std::size_t n) { return diff[n] ? diff[n]->rank_ms - diff[n]->others_ms : 0.0; };
  auto index_of = [&](const HierarchyNode* node) { return static_cast<std::size_t>(node - h->nodes().data()); };

  for (std::size_t n = 0; n < h->nodes().size(); ++n) {
    if (!h->nodes()[n].parent.empty() || !diff[n] || gap(n) < kLagShare * lag_ms) continue;
    // Down the nesting while one child holds half of the difference.
    std::size_t at = n;
    for (;;) {
      std::optional<std::size_t> best;
      for (const HierarchyNode* c : h->children(h->nodes()[at].name))
        if (diff[index_of(c)] && (!best || gap(index_of(c)) > gap(*best))) best = index_of(c);
      if (!best || gap(*best) < 0.5 * gap(at)) break;
      at = *best;
    }
    RegionLag lag{h->nodes()[at].name, diff[at]->rank_ms, diff[at]->others_ms, 0, true};
    double children = 0;
    for (const HierarchyNode* c : h->children(lag.region)) {
      lag.leaf = false;
      children += std::max(0.0, gap(index_of(c)));
    }
    if (!lag.leaf) lag.outside_children_ms = std::max(0.0, gap(at) - children);
    out.push_back(std::move(lag));
  }
  std::sort(out.begin(), out.end(), [](const RegionLag& a, const RegionLag& b) {
    return a.rank_ms - a.others_ms > b.rank_ms - b.others_ms;
  });
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace stepprof
