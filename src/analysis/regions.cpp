#include "stepprof/analysis/regions.hpp"

#include "../util/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace stepprof {

double nesting_tolerance_ms(double parent_ms) { return std::max(0.5, 0.01 * parent_ms); }

std::string_view gap_name(TimeGap gap) {
  switch (gap) {
    case TimeGap::kNone: return "none";
    case TimeGap::kDeviceLonger: return "device_longer";
    case TimeGap::kHostLonger: return "host_longer";
  }
  return "none";
}

std::optional<double> children_ms(const UpdateRecord& u, const std::vector<NameTable::Id>& regions, bool device) {
  std::optional<double> sum;
  for (auto k : regions)
    if (auto t = region_ms(u, k, device)) sum = sum.value_or(0) + *t;
  return sum;
}

std::optional<double> self_ms(const UpdateRecord& u, NameTable::Id region, const std::vector<NameTable::Id>& children,
                              bool device) {
  const auto own = region_ms(u, region, device);
  if (!own) return std::nullopt;
  if (device)
    for (const auto k : children)
      if (const RegionSample* c = u.region(k); c && !c->device_ms && c->host_ms) return std::nullopt;
  return *own - children_ms(u, children, device).value_or(0);
}

std::optional<double> outside_regions_ms(const UpdateRecord& u, const std::vector<NameTable::Id>& top_level) {
  double inside = 0;
  bool any = false, any_host = false;
  for (auto id : top_level) {
    const RegionSample* r = u.region(id);
    if (!r) continue;
    any = true;
    // A region with device time only (e.g. NCCL kernels from a trace) is not an interval
    // of the host's update, so it does not count here.
    if (r->host_ms) inside += *r->host_ms, any_host = true;
  }
  if (any && !any_host) return std::nullopt;
  return u.wall_ms - inside;
}

namespace {

constexpr std::size_t kMaxViolationsKept = 10;

struct Series {
  std::vector<double> device, host, calls, device_self, host_self, basis_self, gap;
  double basis_total = 0, self_total = 0;
  std::size_t present = 0;
};

// The children of a nesting violation in update `u`, longest first (the first
// kViolationChildrenNamed), with their times on the violation's clock [ms].
void name_children(NestingViolation& v, const AnalysisInput& in, const UpdateRecord& u,
                   const std::vector<NameTable::Id>& kids, bool device) {
  auto& out = v.children;
  for (const NameTable::Id kid : kids)
    if (const RegionSample* r = u.region(kid))
      if (const auto ms = device ? r->device_ms : r->host_ms) out.emplace_back(in.data.regions.name(kid), *ms);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  v.children_total = out.size();
  if (out.size() > kViolationChildrenNamed) out.resize(kViolationChildrenNamed);
}

}  // namespace

namespace {

// Data loading with several ranks' logs: per step the largest time of any rank (each
// update's device time where it has one, else its host time; 0 for a rank without the
// region in that step), summarized over the steps (RegionRow::step_max_ms).
void add_step_max(const AnalysisInput& in, RegionTable& t) {
  if (!in.hierarchy) return;
  const auto updates = in.updates();
  for (auto& row : t.rows) {
    const HierarchyNode* node = in.hierarchy->find(row.name);
    const auto id = in.region(row.name);
    if (!node || node->role != RegionRole::kData || !id) continue;
    struct Largest {
      double ms = 0;             // (0 where no rank has it)
      std::int64_t rank = -1;    // the rank with the largest time; -1: none above 0, or a tie
    };
    std::map<std::int64_t, Largest> step_max;
    // Each rank's times where its update has one, and its updates.
    std::map<std::int64_t, std::pair<std::vector<double>, std::size_t>> of_rank;
    for (std::size_t k = 0; k < updates.size(); ++k) {
      auto ms = in.region_ms_of(k, *updates[k], *id, true);
      if (!ms) ms = in.region_ms_of(k, *updates[k], *id, false);
      const double time_ms = ms.value_or(0.0);
      const std::int64_t rank = updates[k]->rank.value_or(-1);
      auto& [times, count] = of_rank[rank];
      if (ms) times.push_back(time_ms);
      ++count;
      Largest& m = step_max[updates[k]->step];
      if (time_ms > m.ms) m = {time_ms, rank};
      else if (time_ms == m.ms) m.rank = -1;
    }
    std::vector<double> v;
    v.reserve(step_max.size());
    std::map<std::int64_t, std::size_t> largest_in;
    for (const auto& [step, m] : step_max) {
      v.push_back(m.ms);
      if (m.rank >= 0) ++largest_in[m.rank];
    }
    row.step_max_ms = summarize(v);
    // A rank slow at loading on its own (found by a helper: a loader sleeping on rank 2
    // was priced for the job, "add data-loader workers", with no word of the rank).
    // The other ranks compared are those with the region in most of their updates, over
    // the updates that have it: a rank that alone loads (a pipeline's first stage) is not
    // slow against ranks that never do (found by a review).
    for (const auto& [rank, n] : largest_in) {
      if (rank < 0 || 3 * n < 2 * step_max.size()) continue;
      std::vector<double> others;
      for (auto& [r, entry] : of_rank)
        if (r != rank && 2 * entry.first.size() > entry.second) others.push_back(*median(entry.first));
      auto& mine_times = of_rank[rank].first;
      if (others.empty() || mine_times.empty()) continue;
      const double mine = *median(mine_times), theirs = *median(others);
      if (mine >= 2 * theirs && mine >= theirs + 1.0)
        row.step_max_rank = RegionRow::SlowLoaderRank{rank, n, step_max.size(), mine, theirs};
    }
  }
}

}  // namespace

RegionTable analyze_regions(const AnalysisInput& in) {
  RegionTable t;
  const auto updates = in.updates();
  t.updates = updates.size();
  t.nesting_known = in.hierarchy != nullptr;
  if (in.hierarchy) t.nesting_source = in.hierarchy->source;

  const std::size_t n_names = in.data.regions.size();
  std::vector<bool> present(n_names, false), device(n_names, false);
  double total_wall = 0;
  for (const auto* u : updates) total_wall += u->wall_ms;
  if (in.index) {  // it has looked at every region of every update already
    for (NameTable::Id id = 0; id < n_names; ++id) {
      present[id] = in.index->has_data(id);
      device[id] = in.index->has_device_time(id);
    }
  } else {
    for (const auto* u : updates)
      for (const auto& r : u->regions) {
        if (r.device_ms || r.host_ms || r.calls) present[r.region] = true;
        if (r.device_ms) device[r.region] = true;
      }
  }

  // Row order and parent links.
  struct Planned {
    NameTable::Id id;
    std::string parent;
    int depth;
    bool in_hierarchy;
    std::vector<NameTable::Id> kids;
  };
  std::vector<Planned> plan;
  auto is_present = [&](std::string_view name) {
    auto id = in.region(name);
    return id && present[*id];
  };
  if (in.hierarchy) {
    const Hierarchy& h = *in.hierarchy;
    // The nesting is walked depth first, children in order, without recursion: a crafted
    // trace nested 27,000 deep overflowed the stack here.
    // A node absent from the log (a wrapper the recorder never records, e.g. a `train_loop`
    // around every region) is no level of the table: its children take its place, at its
    // depth and under its parent, as the log's `parents` put a region whose parent is absent
    // at the top level. Counted through it, the regions below had no top level: the time
    // outside every region was left out of the report, and the CSV and HTML put the whole
    // update there (found by a helper).
    struct Frame {
      const HierarchyNode* node;
      int depth;                // rows above it: absent nodes do not count
      std::string_view parent;  // the nearest present ancestor ("" for none)
    };
    auto walk = [&](auto&& enter) {  // enter(frame) -> whether to walk the node's children
      std::vector<Frame> stack;
      auto push_children = [&](const std::string& name, int depth, std::string_view parent) {
        const auto kids = h.children(name);
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, depth, parent});
      };
      push_children("", 0, "");
      while (!stack.empty()) {
        const Frame f = stack.back();
        stack.pop_back();
        if (!enter(f)) continue;
        if (is_present(f.node->name)) push_children(f.node->name, f.depth + 1, f.node->name);
        else push_children(f.node->name, f.depth, f.parent);
      }
    };
    // The regions of the log below `name` that are its children in the table: its present
    // children, and those below an absent child, as above; background ones left out
    // (they overlap, not part of it).
    auto present_children = [&](const std::string& name) {
      std::vector<NameTable::Id> out;
      for (const HierarchyNode* c : in.children_in_log(name)) out.push_back(*in.region(c->name));
      return out;
    };
    walk([&](const Frame& f) {
      const HierarchyNode* node = f.node;
      // An absent node is no row: its children take its place. (A wrapper the log's
      // `parents` name was a row of "0 of 20 updates" beside its own children: a review.)
      if (!is_present(node->name)) {
        t.not_in_log.push_back(node->name);  // (and, walking on, each absent region below it)
        return true;
      }
      Planned p{in.data.regions.find(node->name).value_or(NameTable::Id(-1)), std::string(f.parent), f.depth, true,
                present_children(node->name)};
      if (p.id != NameTable::Id(-1)) plan.push_back(std::move(p));
      return true;
    });
    for (NameTable::Id id = 0; id < n_names; ++id)
      if (present[id] && !h.find(in.data.regions.name(id))) plan.push_back({id, "", 0, false, {}});
  } else {
    for (NameTable::Id id = 0; id < n_names; ++id)
      if (present[id]) plan.push_back({id, "", 0, false, {}});
  }

  // Each row reads every update once; rows are independent, so on large inputs they
  // are computed on several threads and put together in plan order.
  struct RowResult {
    RegionRow row;
    std::size_t violation_count = 0;
    std::vector<NestingViolation> violations;  // the first few of this row
  };
  std::vector<RowResult> results(plan.size());
  const bool busy_union = in.device_time_is_busy_union();
  t.device_busy_union = busy_union;
  auto compute_row = [&](std::size_t i) {
    const Planned& p = plan[i];
    RowResult& out = results[i];
    Series s;
    for (auto* v : {&s.device, &s.host, &s.calls, &s.gap}) v->reserve(updates.size());
    if (!p.kids.empty())
      for (auto* v : {&s.device_self, &s.host_self, &s.basis_self}) v->reserve(updates.size());
    const bool dev = device[p.id];
    // The region's columns, read in update order.
    const RegionColumns own_columns(in, updates, p.id);
    const UpdateIndex::Columns& col = own_columns.get();
    // The children's times summed per update in p.kids order, NaN where no child has
    // one. One child's columns at a time: without the index each is gathered anew.
    std::vector<double> kids_device, kids_host;
    // Updates in which a child has host time only (self_ms: the device self time is not
    // known there; the host self time is the region's exclusive time in that update).
    std::vector<bool> kids_host_only;
    if (!p.kids.empty()) {
      kids_host_only.assign(updates.size(), false);
      constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
      kids_device.assign(updates.size(), kNone);
      kids_host.assign(updates.size(), kNone);
      for (auto kid : p.kids) {
        const RegionColumns kid_columns(in, updates, kid);
        const UpdateIndex::Columns& kc = kid_columns.get();
        auto add = [](double& sum, double ms) {
          if (!std::isnan(ms)) sum = (std::isnan(sum) ? 0 : sum) + ms;  // the first child's time starts the sum
        };
        for (std::size_t k = 0; k < updates.size(); ++k) {
          add(kids_device[k], kc.device[k]);
          add(kids_host[k], kc.host[k]);
          if (std::isnan(kc.device[k]) && !std::isnan(kc.host[k])) kids_host_only[k] = true;
        }
      }
    }
    for (std::size_t k = 0; k < updates.size(); ++k) {
      if (!col.present[k]) continue;
      ++s.present;
      const double device_ms = col.device[k], host_ms = col.host[k], calls = col.calls[k];
      const bool has_device = !std::isnan(device_ms), has_host = !std::isnan(host_ms);
      if (has_device) s.device.push_back(device_ms);
      if (has_host) s.host.push_back(host_ms);
      if (!std::isnan(calls)) s.calls.push_back(calls);
      if (has_device && has_host) s.gap.push_back(device_ms - host_ms);
      // Device time where this update has it, else host time (a call on a thread without
      // device timing; the cross-rank analysis reads a region so too). Per region, the
      // host-only updates' time was left out of the share.
      const bool on_device = dev && has_device;
      const bool has_basis = on_device || has_host;
      const double basis = on_device ? device_ms : host_ms;
      if (has_basis) s.basis_total += basis;
      if (p.kids.empty()) {
        if (has_basis) s.self_total += basis;
        continue;
      }
      // (A child with host time only: the device self time is unknown in this update, and
      // the exclusive time counts its host self time, as an update without device time.)
      const bool device_self = on_device && !busy_union && !kids_host_only[k];
      for (const bool d : {true, false}) {
        // Busy-union device times do not subtract (children on other streams overlap).
        if (d && (busy_union || kids_host_only[k])) continue;
        const double own = d ? device_ms : host_ms;
        if (std::isnan(own)) continue;
        const double kids_sum = (d ? kids_device : kids_host)[k];
        const bool any_kid = !std::isnan(kids_sum);
        const double kids = any_kid ? kids_sum : 0;
        const double self = own - kids;
        (d ? s.device_self : s.host_self).push_back(self);
        if (d == device_self) {
          s.self_total += self;
          s.basis_self.push_back(self);
        }
        if (any_kid && self < -nesting_tolerance_ms(own)) {
          ++out.violation_count;
          const UpdateRecord* u = updates[k];
          if (out.violations.size() < kMaxViolationsKept) {
            out.violations.push_back({std::string(in.data.regions.name(p.id)), u->step, u->rank.value_or(-1), own,
                                      kids, d, {}, 0, 0, {}, 0});
            name_children(out.violations.back(), in, *u, p.kids, d);
          }
        }
      }
    }
    RegionRow& row = out.row;
    row.name = std::string(in.data.regions.name(p.id));
    row.parent = p.parent;
    row.depth = p.depth;
    row.in_hierarchy = p.in_hierarchy;
    row.background = in.hierarchy && in.hierarchy->in_background(row.name);
    row.updates_present = s.present;
    row.device_ms = summarize(std::move(s.device));
    row.host_ms = summarize(std::move(s.host));
    row.calls = summarize(std::move(s.calls));
    if (!p.kids.empty()) {
      row.device_self_ms = summarize(std::move(s.device_self));
      row.host_self_ms = summarize(std::move(s.host_self));
      row.self_ms = summarize(std::move(s.basis_self));
    }
    if (total_wall > 0) {
      row.share = s.basis_total / total_wall;
      if (t.nesting_known && (p.kids.empty() || row.self_ms)) row.self_share = s.self_total / total_wall;
    }
    if (auto g = median(s.gap)) {
      row.gap_ms = *g;
      const double larger = std::max(row.device_ms ? row.device_ms->median : 0.0, row.host_ms ? row.host_ms->median : 0.0);
      if (std::fabs(*g) > std::max(1.0, 0.2 * larger))
        row.gap = *g > 0 ? TimeGap::kDeviceLonger : TimeGap::kHostLonger;
    }
  };
  constexpr std::size_t kThreadFrom = 50'000;  // updates
  detail::parallel_for(plan.size(), updates.size() >= kThreadFrom ? 0 : 1, compute_row);
  for (auto& r : results) {
    t.violation_count += r.violation_count;
    for (auto& v : r.violations)
      if (t.violations.size() < kMaxViolationsKept) t.violations.push_back(std::move(v));
    t.rows.push_back(std::move(r.row));
  }
  if (!in.hierarchy)
    std::stable_sort(t.rows.begin(), t.rows.end(), [](const RegionRow& a, const RegionRow& b) { return a.share > b.share; });

  if (in.hierarchy) {
    // The top level: present regions with no present ancestor (below an absent wrapper too).
    std::vector<NameTable::Id> top;
    for (const auto& p : plan)
      if (p.in_hierarchy && p.depth == 0 && p.parent.empty() && present[p.id] &&
          !in.hierarchy->in_background(in.data.regions.name(p.id)))
        top.push_back(p.id);
    std::vector<double> outside;
    if (!top.empty()) {
      // Per update: the top-level regions' host time (as outside_regions_ms: absent counts
      // 0) and the longest of them. One region's columns at a time: all of them at once
      // held updates x top-level regions values (7.2 GB for a 13 MB log of 4,000 updates
      // that each name 16 regions of their own).
      std::vector<double> inside_of(updates.size(), 0.0), longest_of(updates.size(), 0.0);
      std::vector<std::size_t> longest_at_of(updates.size(), 0);
      // 1: a top-level region in the update, 2: one with a host time (outside_regions_ms).
      std::vector<std::uint8_t> timed(updates.size(), 0);
      for (std::size_t j = 0; j < top.size(); ++j) {
        const RegionColumns column(in, updates, top[j]);
        const auto& host = column.get().host;
        const auto& in_update = column.get().present;
        for (std::size_t k = 0; k < updates.size(); ++k) {
          if (in_update[k]) timed[k] |= 1;
          if (const double h = host[k]; !std::isnan(h)) {
            timed[k] |= 2;
            inside_of[k] += h;
            if (h > longest_of[k]) longest_of[k] = h, longest_at_of[k] = j;
          }
        }
      }
      for (std::size_t k = 0; k < updates.size(); ++k) {
        if (timed[k] == 1) continue;  // (device times only: not known)
        const UpdateRecord* u = updates[k];
        // A wall time of 0 (a clock never started; the zero-wall-time warning names it) is
        // no update length: such an update was the first, unpriced finding "the nesting does
        // not fit", with every top-level region "longer than the update".
        if (!(u->wall_ms > 0)) continue;
        const double inside = inside_of[k], longest = longest_of[k];
        const std::size_t longest_at = longest_at_of[k];
        const double o = u->wall_ms - inside;
        outside.push_back(o);
        // Top-level regions are consecutive parts of the update: together they cannot
        // take longer than it.
        if (o < -nesting_tolerance_ms(u->wall_ms)) {
          ++t.violation_count;
          if (t.violations.size() < kMaxViolationsKept) {
            NestingViolation v{std::string(kUpdateAsParent), u->step, u->rank.value_or(-1), u->wall_ms, inside, false,
                               {}, 0, 0, {}, 0};
            name_children(v, in, *u, top, false);
            // One region longer than the update: it began before an earlier end_update().
            if (longest > u->wall_ms + nesting_tolerance_ms(u->wall_ms)) {
              v.longer_child = std::string(in.data.regions.name(top[longest_at]));
              v.longer_child_ms = longest;
              if (const RegionSample* r = u->region(top[longest_at]); r && r->calls) v.longer_child_calls = *r->calls;
            }
            t.violations.push_back(std::move(v));
          }
        }
      }
    }
    if (!outside.empty()) t.outside_regions_ms = summarize(outside);
    for (const auto& row : t.rows)
      if (!row.in_hierarchy) t.not_in_nesting.push_back(row.name);
  }
  if (in.data.ranks.size() > 1) add_step_max(in, t);
  return t;
}

std::string violation_children_text(const NestingViolation& v) {
  if (v.children.empty()) return {};
  std::string out;
  for (const auto& [name, ms] : v.children) out += fmt::format("{}{} {:.1f} ms", out.empty() ? "" : ", ", name, ms);
  if (v.children_total > v.children.size()) out += fmt::format(" and {} more", v.children_total - v.children.size());
  return " (" + out + ")";
}

}  // namespace stepprof
