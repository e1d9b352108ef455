#include "stepprof/analysis/series.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "stepprof/schema.hpp"

namespace stepprof {

std::optional<double> update_padding_fraction(const UpdateRecord& u, std::optional<NameTable::Id> token_slots,
                                              std::optional<NameTable::Id> valid_tokens) {
  if (token_slots && valid_tokens) {
    const auto slots = u.counter(*token_slots), valid = u.counter(*valid_tokens);
    if (slots && valid && *slots > 0) return 1.0 - *valid / *slots;
  }
  return u.padding_fraction;
}

std::size_t breakdown_count(const UpdateSeries& s) {
  if (!s.nesting_known) return 1;
  int max_depth = -1;
  for (const auto& r : s.regions)
    if (r.in_nesting && !r.background) max_depth = std::max(max_depth, r.depth);  // (background: not a part of the update)
  // (At most kMaxBreakdownLevels cuts: each costs a pass over every region, and a crafted
  // nesting 30,000 deep took html 77 s here.)
  return static_cast<std::size_t>(std::min(max_depth, kMaxBreakdownLevels - 1) + 1);
}

namespace {

using Plan = detail::SeriesPlan;

std::optional<double> self_ms(const UpdateRecord& u, const Plan& p, bool device) {
  return stepprof::self_ms(u, *p.id, p.kids, device);
}

std::vector<Breakdown> breakdowns(const UpdateSeries& s, const std::vector<Plan>& plans, const RankLog& rank) {
  std::vector<Breakdown> out;
  const auto& regions = s.regions;
  // The clock of each row (SeriesRegion::device), host time where device times are busy
  // unions (UpdateSeries::device_busy_union).
  auto device = [&](std::size_t i) { return regions[i].device && !s.device_busy_union; };
  auto value = [&](const UpdateRecord& u, StackPart::Kind kind, std::size_t i) -> std::optional<double> {
    if (!plans[i].id) return std::nullopt;
    auto on = [&](bool dev) {
      return kind == StackPart::Kind::kSelf ? self_ms(u, plans[i], dev) : region_ms(u, *plans[i].id, dev);
    };
    // Device time where the update has it, else host time (a call on a thread without
    // device timing), as path_series and the region table's share read a region: a part
    // left out of an update's stack lost its time there.
    auto v = on(device(i));
    if (!v && device(i)) v = on(false);
    return v;
  };
  auto values = [&](StackPart::Kind kind, std::size_t i) {
    std::vector<std::optional<double>> v;
    v.reserve(rank.updates.size());
    for (const auto& u : rank.updates) v.push_back(value(u, kind, i));
    return v;
  };
  // Each row's time summed over the rank's updates, from the updates' own regions (one
  // pass: a log with a region per update has thousands of rows).
  std::vector<std::ptrdiff_t> row_of;  // region id -> row, -1 for none
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (plans[i].id) {
      if (*plans[i].id >= row_of.size()) row_of.resize(*plans[i].id + 1, -1);
      row_of[*plans[i].id] = static_cast<std::ptrdiff_t>(i);
    }
  std::vector<double> total(regions.size(), 0.0);
  std::vector<char> timed(regions.size(), 0);  // the row has a time on its clock in some update
  for (const auto& u : rank.updates)
    for (const auto& r : u.regions)
      if (r.region < row_of.size() && row_of[r.region] >= 0) {
        const auto i = static_cast<std::size_t>(row_of[r.region]);
        const auto t = region_ms(u, r.region, device(i));
        total[i] += t.value_or(0.0);
        if (t) timed[i] = 1;
      }
  // Of more than kMaxParts rows (names made with the step in them), the kMaxParts - 1 with
  // the most time, in table order; the others, if `merge`, as one part that sums them.
  auto cap = [&](std::vector<std::pair<std::size_t, StackPart::Kind>> rows, bool merge, Breakdown& b) {
    std::vector<std::pair<std::size_t, StackPart::Kind>> rest;
    if (rows.size() > kMaxParts) {
      std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& c) { return total[a.first] > total[c.first]; });
      rest.assign(rows.begin() + static_cast<std::ptrdiff_t>(kMaxParts - 1), rows.end());
      rows.resize(kMaxParts - 1);
      std::sort(rows.begin(), rows.end());
    }
    for (const auto& [i, kind] : rows) b.parts.push_back({kind, regions[i].name, values(kind, i)});
    if (rest.empty() || !merge) return;
    std::vector<StackPart::Kind> kind_of(regions.size(), StackPart::Kind::kOutside);  // kOutside: not in `rest`
    for (const auto& [i, kind] : rest) kind_of[i] = kind;
    StackPart others{StackPart::Kind::kRegion, fmt::format("({} other regions)", rest.size()), {}};
    for (const auto& u : rank.updates) {
      std::optional<double> sum;
      for (const auto& r : u.regions) {
        if (r.region >= row_of.size() || row_of[r.region] < 0) continue;
        const auto i = static_cast<std::size_t>(row_of[r.region]);
        if (kind_of[i] == StackPart::Kind::kOutside) continue;
        if (const auto v = value(u, kind_of[i], i)) sum = sum.value_or(0.0) + *v;
      }
      others.ms.push_back(sum);
    }
    b.parts.push_back(std::move(others));
  };
  if (!s.nesting_known) {
    Breakdown b{-1, false, {}};
    std::vector<std::pair<std::size_t, StackPart::Kind>> rows;
    for (std::size_t i = 0; i < regions.size(); ++i) rows.emplace_back(i, StackPart::Kind::kRegion);
    cap(std::move(rows), false, b);  // (unstacked: a sum of overlapping regions would mean nothing)
    out.push_back(std::move(b));
    return out;
  }
  std::vector<NameTable::Id> top;
  for (std::size_t i = 0; i < regions.size(); ++i)
    if (regions[i].in_nesting && !regions[i].background && regions[i].depth == 0 && plans[i].id)
      top.push_back(*plans[i].id);
  std::vector<std::optional<double>> outside;
  for (const auto& u : rank.updates) outside.emplace_back(outside_regions_ms(u, top));
  const int levels = static_cast<int>(breakdown_count(s));
  for (int level = 0; level < levels; ++level) {
    Breakdown b{level, true, {}};
    std::vector<std::pair<std::size_t, StackPart::Kind>> rows;
    for (std::size_t i = 0; i < regions.size(); ++i) {
      const auto& r = regions[i];
      if (!r.in_nesting || r.background || r.depth > level) continue;
      if (s.device_busy_union && !timed[i]) continue;  // (device time only: not on the host's timeline)
      const bool parent_above_cut = r.depth < level && !plans[i].kids.empty();
      rows.emplace_back(i, parent_above_cut ? StackPart::Kind::kSelf : StackPart::Kind::kRegion);
    }
    cap(std::move(rows), true, b);
    b.parts.push_back({StackPart::Kind::kOutside, "", outside});
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<PathGroupSeries> path_series(const AnalysisInput& in, const CodePathResult& paths, const RankLog& rank) {
  std::vector<PathGroupSeries> out;
  for (const auto& g : paths.groups) {
    PathGroupSeries gs{g.group, g.unit, {}};
    for (const auto& p : g.paths) {
      PathSeries ps{p.region, p.device, {}};
      const auto id = in.region(p.region);
      const PathWork unit = g.unit == "frame" ? PathWork::kFrames : PathWork::kSamples;
      for (const auto& u : rank.updates) {
        auto t = id ? region_ms(u, *id, p.device) : std::nullopt;
        if (!t && id && p.device) t = region_ms(u, *id, false);  // (a rank with device timing off)
        const auto w = path_work(p, unit, u);
        ps.ms_per_unit.push_back(t && w && *w > 0 ? std::optional<double>(*t / *w) : std::nullopt);
      }
      gs.paths.push_back(std::move(ps));
    }
    out.push_back(std::move(gs));
  }
  return out;
}

RankSeries rank_series(const AnalysisInput& in, const Report& report, const UpdateSeries& s,
                       const std::vector<Plan>& plans, const RankLog& rank, RankDetail detail) {
  const bool full = detail != RankDetail::kHeadline;
  RankSeries rs;
  rs.rank = rank.rank;
  const auto slots = in.counter(schema::counter::kTokenSlots);
  const auto valid = in.counter(schema::counter::kValidTokens);
  if (full) rs.counters.resize(s.counters.size());
  std::vector<NameTable::Id> top;
  for (std::size_t i = 0; i < s.regions.size(); ++i)
    if (s.regions[i].in_nesting && !s.regions[i].background && s.regions[i].depth == 0 && plans[i].id)
      top.push_back(*plans[i].id);

  for (std::size_t k = 0; k < rank.updates.size(); ++k) {
    const UpdateRecord& u = rank.updates[k];
    rs.steps.push_back(u.step);
    rs.wall_ms.push_back(u.wall_ms);
    rs.padding_fraction.push_back(update_padding_fraction(u, slots, valid));
    rs.outside_ms.push_back(s.nesting_known ? outside_regions_ms(u, top) : std::nullopt);
    if (!full) continue;
    for (NameTable::Id c = 0; c < s.counters.size(); ++c) rs.counters[c].push_back(u.counter(c));
    for (std::size_t i = 0; i < s.regions.size(); ++i) {
      if (!plans[i].id) continue;
      const RegionSample* r = u.region(*plans[i].id);
      if (!r) continue;
      RegionPoint p;
      p.update = static_cast<std::uint32_t>(k);
      p.region = static_cast<std::uint32_t>(i);
      p.device_ms = r->device_ms;
      p.host_ms = r->host_ms;
      p.calls = r->calls;
      if (s.regions[i].in_nesting) {
        p.device_self_ms = self_ms(u, plans[i], true);
        p.host_self_ms = self_ms(u, plans[i], false);
      }
      rs.regions.push_back(p);
    }
  }
  if (detail != RankDetail::kFull) return rs;
  rs.breakdowns = breakdowns(s, plans, rank);
  rs.paths = path_series(in, report.paths, rank);
  return rs;
}

void add_matrices(UpdateSeries& s, const AnalysisInput& in, const Report& report) {
  std::set<std::int64_t> steps;
  for (const auto& r : s.ranks) steps.insert(r.steps.begin(), r.steps.end());
  s.steps.assign(steps.begin(), steps.end());
  if (s.ranks.size() < 2) return;
  auto column = [&](std::int64_t step) {
    return static_cast<std::size_t>(std::lower_bound(s.steps.begin(), s.steps.end(), step) - s.steps.begin());
  };
  RankStepMatrix wall{"update_ms", "update time (wall_ms) per rank and step [ms]", {}};
  for (const auto& r : s.ranks) {
    auto& row = wall.values.emplace_back(s.steps.size());
    for (std::size_t k = 0; k < r.steps.size(); ++k) row[column(r.steps[k])] = r.wall_ms[k];
  }
  s.matrices.push_back(std::move(wall));

  const bool every_rank_has_comm =
      report.waiting.size() == in.data.ranks.size() &&
      std::all_of(report.waiting.begin(), report.waiting.end(), [&](const WaitingResult& w) {
        return !w.comm_region.empty() && in.region(w.comm_region).has_value();
      });
  if (!every_rank_has_comm) return;
  RankStepMatrix outside{"outside_comm_ms", "", {}};
  bool host = false, device = false;  // the clocks the values took
  for (std::size_t i = 0; i < in.data.ranks.size(); ++i) {
    auto& row = outside.values.emplace_back(s.steps.size());
    const NameTable::Id comm = *in.region(report.waiting[i].comm_region);
    for (const auto& u : in.data.ranks[i].updates) {
      const RegionSample* r = u.region(comm);
      if (!r || !(r->host_ms || r->device_ms)) continue;
      row[column(u.step)] = u.wall_ms - (r->host_ms ? *r->host_ms : *r->device_ms);
      (r->host_ms ? host : device) = true;
    }
  }
  // (A trace's `nccl` has device time only: the title said "its host time" of it.)
  outside.title = fmt::format("time outside the communication region (wall_ms minus its {}) per rank and step [ms]",
                              !device ? "host time"
                              : !host ? "device time"
                                      : "host time, or its device time where it has no host time");
  s.matrices.push_back(std::move(outside));
}

}  // namespace

SeriesBuilder::SeriesBuilder(const AnalysisInput& in, const Report& report) : in_(in), report_(report) {
  UpdateSeries& s = head_;
  s.nesting_known = report.regions.nesting_known;
  s.device_busy_union = report.regions.device_busy_union;
  for (NameTable::Id c = 0; c < in.data.counters.size(); ++c) s.counters.emplace_back(in.data.counters.name(c));

  std::vector<Plan>& plans = plans_;
  for (const auto& row : report.regions.rows) {
    const auto id = in.region(row.name);
    s.regions.push_back({row.name, row.parent, row.depth, s.nesting_known && row.in_hierarchy, row.background,
                         id && in.has_device_time(*id)});
    plans.push_back({id, {}});
  }
  // Children: rows in the nesting whose parent is the row, other than one of role
  // "background" (the regions analysis's rule: it runs alongside its parent, not in it).
  // (Rows by name, not a scan of every row for each: 30,000 regions made that 9 s.)
  std::unordered_map<std::string_view, std::vector<std::size_t>> nesting_rows;
  for (std::size_t j = 0; j < s.regions.size(); ++j)
    if (s.regions[j].in_nesting) nesting_rows[s.regions[j].name].push_back(j);
  for (std::size_t i = 0; i < s.regions.size(); ++i) {
    if (!s.regions[i].in_nesting || s.regions[i].parent.empty() || !plans[i].id) continue;
    if (const HierarchyNode* node = in.hierarchy ? in.hierarchy->find(s.regions[i].name) : nullptr;
        node && node->role == RegionRole::kBackground)
      continue;
    if (const auto it = nesting_rows.find(s.regions[i].parent); it != nesting_rows.end())
      for (const std::size_t j : it->second) plans[j].kids.push_back(*plans[i].id);
  }
}

RankSeries SeriesBuilder::rank(std::size_t i, RankDetail detail) const {
  return rank_series(in_, report_, head_, plans_, in_.data.ranks[i], detail);
}

UpdateSeries SeriesBuilder::overview() const {
  UpdateSeries s = head_;
  s.ranks.reserve(rank_count());
  for (std::size_t i = 0; i < rank_count(); ++i) s.ranks.push_back(rank(i, RankDetail::kHeadline));
  add_matrices(s, in_, report_);
  return s;
}

UpdateSeries build_series(const AnalysisInput& in, const Report& report, const std::vector<bool>* full) {
  const SeriesBuilder builder(in, report);
  UpdateSeries s = builder.overview();
  for (std::size_t i = 0; i < builder.rank_count(); ++i)
    if (!full || (i < full->size() && (*full)[i])) s.ranks[i] = builder.rank(i, RankDetail::kFull);
  return s;
}

}  // namespace stepprof
