#include "kineto_model.hpp"
#include "stepprof/schema.hpp"
#include "../util/text.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace stepprof::detail {
namespace {

constexpr std::int32_t kNone = -1;
constexpr std::uint32_t kNcclSlot = std::numeric_limits<std::uint32_t>::max();

// Per-step totals of one annotation name.
struct RegionAgg {
  std::int64_t host_ns = 0;
  std::int64_t calls = 0;
  std::int64_t first_start = std::numeric_limits<std::int64_t>::max();
  std::int32_t parent = kNone;  // place id of the first call's parent, kNone: top level
  std::int64_t device_ns = -1;  // -1: launched no GPU work
};

// One GPU interval charged to a region (annotation name id or kNcclSlot) on a stream.
struct Charge {
  std::uint32_t region;
  std::uint32_t stream;
  std::int64_t start, end;
};

}  // namespace

void KinetoModel::add_step(std::int64_t step, std::int64_t tid, std::int64_t start_ns, std::int64_t end_ns,
                           std::uint64_t line) {
  steps_.push_back({step, tid, start_ns, end_ns, line});
}

void KinetoModel::drop_repeated_steps(KinetoStats& stats) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    bool repeat = false;
    for (std::size_t k = kept; k-- > 0 && steps_[k].start == s.start;)  // (equal starts are adjacent)
      if (steps_[k].step == s.step && steps_[k].tid == s.tid && steps_[k].end == s.end) repeat = true;
    if (!repeat) {
      steps_[kept++] = s;
      continue;
    }
    if (stats.repeated_steps++ == 0) stats.first_repeat_line = s.line, stats.first_repeat_step = s.step;
  }
  steps_.resize(kept);
}

void KinetoModel::drop_astray_steps(KinetoStats& stats) {
  const std::size_t n = steps_.size();
  if (n < 2) return;
  // Groups of steps (sorted by start) with no gap of over an hour inside: two steps
  // damaged alike lie together, far from the rest.
  std::vector<std::size_t> group(n, 0);
  std::size_t groups = 1;
  std::int64_t reach = steps_[0].end;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && (static_cast<double>(steps_[i].start) - static_cast<double>(reach)) / 1e6 > kGpuLongestMs) ++groups;
    reach = std::max(reach, steps_[i].end);
    group[i] = groups - 1;
  }
  if (groups < 2) return;  // (the usual trace: no table of starts is made)
  // Where work starts (user annotations, runtime launches, GPU activity), sorted: a step
  // holds work when one starts in its range.
  std::vector<std::int64_t> work;
  work.reserve(annotations_.size() + launches_.size() + gpu_.size());
  for (const auto& a : annotations_) work.push_back(a.start);
  for (const auto& l : launches_) work.push_back(l.ts);
  for (const auto& g : gpu_) work.push_back(g.start);
  std::sort(work.begin(), work.end());
  std::vector<char> group_works(groups, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = std::lower_bound(work.begin(), work.end(), steps_[i].start);
    if (it != work.end() && *it < steps_[i].end) group_works[group[i]] = 1;
  }
  if (std::none_of(group_works.begin(), group_works.end(), [](char w) { return w != 0; })) return;  // (nothing to tell them apart by)
  // The first step left out, and its distance to the nearest step kept [ms] (before the
  // steps are moved).
  for (std::size_t i = 0; i < n; ++i) {
    if (group_works[group[i]]) continue;
    if (stats.steps_astray++ > 0) continue;
    stats.first_astray_step = steps_[i].step;
    stats.first_astray_line = steps_[i].line;
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n; ++j)
      if (group_works[group[j]]) {
        const double a = static_cast<double>(steps_[i].start), b = static_cast<double>(steps_[j].start);
        const double d = a < b ? b - static_cast<double>(steps_[i].end) : a - static_cast<double>(steps_[j].end);
        gap = std::min(gap, std::max(0.0, d) / 1e6);
      }
    stats.first_astray_gap_ms = gap;
  }
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (group_works[group[i]]) steps_[k++] = steps_[i];
  steps_.resize(k);
}

void KinetoModel::add_annotation(std::string_view name, std::int64_t tid, std::int64_t start_ns,
                                 std::int64_t end_ns) {
  annotations_.push_back({tid, start_ns, end_ns, names_.intern(name)});
}

void KinetoModel::add_launch(std::int64_t correlation, std::int64_t tid, std::int64_t ts_ns) {
  launches_.push_back({correlation, tid, ts_ns});
}

void KinetoModel::add_flow(std::int64_t id, std::int64_t tid, std::int64_t ts_ns) { flows_.push_back({id, tid, ts_ns}); }

void KinetoModel::add_gpu(GpuKind kind, bool nccl, std::optional<std::int64_t> correlation, std::int64_t device,
                          std::int64_t stream, std::int64_t start_ns, std::int64_t end_ns) {
  gpu_.push_back({correlation.value_or(0), device, stream, start_ns, end_ns, kind, nccl, correlation.has_value()});
}

std::vector<std::int64_t> KinetoModel::devices() const {
  std::vector<std::int64_t> d;
  for (const auto& g : gpu_) d.push_back(g.device);
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

std::size_t KinetoModel::bytes() const {
  return steps_.size() * sizeof(Step) + annotations_.size() * sizeof(Annotation) +
         (launches_.size() + flows_.size()) * sizeof(Launch) + gpu_.size() * sizeof(Gpu);
}

KinetoModel::PlaceTable KinetoModel::make_places(const std::vector<std::int32_t>& parent,
                                                 const std::vector<std::int32_t>& step_of_ann) const {
  // Beyond these, places are not used (one region per name, as before places): a crafted
  // or generated trace could make a region per call path, hundreds of thousands of them,
  // or a nesting thousands deep that the analyses walk. Only places beyond a name's first
  // count (names made with the step number in them are one place each); the log writer
  // costs the square of an update's regions (import: 2.3 s for 7,380 places in 20 steps).
  constexpr std::size_t kMaxExtraPlaces = 1'000;
  constexpr std::uint32_t kMaxDepth = 64;
  // A qualified name longer than this is not qualified further: "name (place N)".
  constexpr std::size_t kMaxQualifier = 256;
  // The key of a call at the top of a worker thread (its parent is on the step's thread).
  constexpr std::int32_t kOtherThread = -3;
  const std::size_t na = annotations_.size();
  PlaceTable t;
  t.place_parent.assign(na, kNone);
  t.recursive.assign(na, 0);
  auto in_step = [&](std::int32_t p, std::size_t i) {
    return p != kNone && step_of_ann[static_cast<std::size_t>(p)] == step_of_ann[i];
  };
  auto same_name = [&](std::int32_t p, std::size_t i) {
    return annotations_[static_cast<std::size_t>(p)].name == annotations_[i].name;
  };
  // The annotations in a step, each after its parent (parents form a forest).
  std::vector<std::size_t> topo;
  {
    std::vector<std::uint8_t> seen(na, 0);
    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < na; ++i) {
      if (step_of_ann[i] == kNone || seen[i]) continue;
      pending.clear();
      for (std::int32_t j = static_cast<std::int32_t>(i); in_step(j, i) && !seen[static_cast<std::size_t>(j)];
           j = parent[static_cast<std::size_t>(j)]) {
        seen[static_cast<std::size_t>(j)] = 1;
        pending.push_back(static_cast<std::size_t>(j));
      }
      topo.insert(topo.end(), pending.rbegin(), pending.rend());
    }
  }
  // The nearest enclosing annotation of another name (through calls of the same name,
  // which make a call recursive: the same region, its time counted once).
  for (const std::size_t i : topo) {
    const std::int32_t p = parent[i];
    if (!in_step(p, i)) continue;
    if (same_name(p, i)) {
      t.recursive[i] = 1;
      t.place_parent[i] = t.place_parent[static_cast<std::size_t>(p)];
    } else {
      t.place_parent[i] = p;
    }
  }
  struct Place {
    std::uint32_t name;
    std::int32_t parent;  // place id; kNone: top level; kOtherThread: top of a worker thread
    std::uint32_t depth;
  };
  std::vector<Place> list;
  std::map<std::pair<std::uint32_t, std::int32_t>, std::int32_t> ids;
  std::vector<std::uint32_t> places_of_name(names_.size(), 0);
  std::vector<std::int32_t> of(na, kNone);
  bool too_many = false;
  std::size_t extra_places = 0;  // places of a name beyond its first
  for (const std::size_t i : topo) {
    if (t.recursive[i]) {
      of[i] = of[static_cast<std::size_t>(parent[i])];
      continue;
    }
    // Keyed by the parent's place on the same thread; a call at the top of a worker thread
    // (under what the step's thread has open, or nothing) by kOtherThread.
    const std::int32_t pp = t.place_parent[i];
    const std::int64_t tid = annotations_[i].tid;
    const bool worker = tid != steps_[static_cast<std::size_t>(step_of_ann[i])].tid;
    const std::int32_t key = pp != kNone && annotations_[static_cast<std::size_t>(pp)].tid == tid
                                 ? of[static_cast<std::size_t>(pp)]
                             : worker ? kOtherThread
                                      : kNone;
    const std::uint32_t name = annotations_[i].name;
    const auto [pos, added] = ids.try_emplace({name, key}, static_cast<std::int32_t>(list.size()));
    if (added) {
      const std::uint32_t depth = key >= 0 ? list[static_cast<std::size_t>(key)].depth + 1 : 1;
      list.push_back({name, key, depth});
      if (++places_of_name[name] > 1) ++extra_places;
      if (extra_places > kMaxExtraPlaces || depth > kMaxDepth) {
        too_many = true;
        break;
      }
      if (places_of_name[name] == 2 && t.names_at_several_places++ == 0)
        t.first_split_name = std::string(names_.name(name));
    }
    of[i] = pos->second;
  }
  t.of.assign(na, 0);
  if (too_many) {
    // One region per name; a call inside a call of its name anywhere up its chain in the
    // step adds a call, not time.
    t.by_name = true;
    t.names_at_several_places = 0;
    t.first_split_name.clear();
    for (std::size_t i = 0; i < na; ++i) {
      t.of[i] = annotations_[i].name;
      t.recursive[i] = 0;
      if (step_of_ann[i] == kNone) continue;
      for (std::int32_t p = parent[i]; in_step(p, i); p = parent[static_cast<std::size_t>(p)])
        if (same_name(p, i)) {
          t.recursive[i] = 1;
          break;
        }
    }
    t.display.reserve(names_.size());
    for (NameTable::Id n = 0; n < names_.size(); ++n) t.display.emplace_back(names_.name(n));
    return t;
  }
  for (std::size_t i = 0; i < na; ++i)
    if (of[i] >= 0) t.of[i] = static_cast<std::uint32_t>(of[i]);
  // Names. The trace's own names first, so that one that reads like a qualified name
  // ("c (in a)") keeps it; then the qualified ones, parents first (a place's parent has a
  // smaller id), a taken one getting " [2]", " [3]", ...
  t.display.resize(list.size());
  std::unordered_set<std::string> used;
  auto qualified = [&](const Place& p) { return places_of_name[p.name] >= 2 && p.parent != kNone; };
  for (std::size_t p = 0; p < list.size(); ++p)
    if (!qualified(list[p])) used.insert(t.display[p] = std::string(names_.name(list[p].name)));
  std::unordered_map<std::string, std::size_t> next_suffix;
  // `base` + `suffix`, with `base` cut (at a character, "...") so that the whole stays a
  // name a step log may hold: a 1,020-byte name " (in p1)" was a region `report` read from
  // the trace but rejected from the log `import kineto` wrote.
  auto with_suffix = [](std::string_view base, const std::string& suffix) {
    if (base.size() + suffix.size() <= schema::kMaxNameBytes) return std::string(base) + suffix;
    return std::string(prefix_at_character(base, schema::kMaxNameBytes - suffix.size() - 3)) + "..." + suffix;
  };
  for (std::size_t p = 0; p < list.size(); ++p) {
    if (!qualified(list[p])) continue;
    const std::string_view name = names_.name(list[p].name);
    std::string d;
    if (list[p].parent == kOtherThread) d = with_suffix(name, " (other thread)");
    else if (const auto& outer = t.display[static_cast<std::size_t>(list[p].parent)]; outer.size() <= kMaxQualifier)
      d = with_suffix(name, fmt::format(" (in {})", outer));
    else
      d = with_suffix(name, fmt::format(" (place {})", p));
    if (!used.insert(d).second) {
      std::size_t& k = next_suffix.try_emplace(d, 2).first->second;
      std::string alt;
      do alt = with_suffix(d, fmt::format(" [{}]", k++));
      while (!used.insert(alt).second);
      d = std::move(alt);
    }
    t.display[p] = std::move(d);
  }
  return t;
}

namespace {

// Sorts intervals [start, end) and merges those that overlap or touch, in place.
void merge_spans(std::vector<std::pair<std::int64_t, std::int64_t>>& v) {
  std::sort(v.begin(), v.end());
  std::size_t n = 0;
  for (const auto& iv : v) {
    if (n > 0 && iv.first <= v[n - 1].second) v[n - 1].second = std::max(v[n - 1].second, iv.second);
    else v[n++] = iv;
  }
  v.resize(n);
}

// The length of the union of `comm` outside the union of `compute` [ns] (both sorted and
// merged in place).
std::int64_t exposed_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& comm,
                        std::vector<std::pair<std::int64_t, std::int64_t>>& compute) {
  merge_spans(comm);
  merge_spans(compute);
  std::int64_t exposed = 0;
  std::size_t j = 0;
  for (const auto& [start, end] : comm) {
    std::int64_t covered = 0;
    while (j < compute.size() && compute[j].second <= start) ++j;
    for (std::size_t k = j; k < compute.size() && compute[k].first < end; ++k)
      covered += std::min(end, compute[k].second) - std::max(start, compute[k].first);
    exposed += (end - start) - covered;
  }
  return exposed;
}

}  // namespace

std::vector<UpdateRecord> KinetoModel::build(NameTable& regions, NameTable& counters, std::string_view nccl_region,
                                             std::string_view exposed_name, std::uint32_t file_index,
                                             KinetoStats& stats, std::int64_t epoch_offset_ns) {
  std::vector<UpdateRecord> out;
  if (steps_.empty()) return out;
  std::stable_sort(steps_.begin(), steps_.end(), [](const Step& a, const Step& b) { return a.start < b.start; });
  drop_repeated_steps(stats);
  drop_astray_steps(stats);
  // Unix times when they look like them (PyTorch writes microseconds since the epoch, or
  // since baseTimeNanoseconds): the cross-rank analysis compares when ranks entered a step.
  const auto unix_ms = [&](std::int64_t ns) {
    return static_cast<double>(ns) / 1e6 + static_cast<double>(epoch_offset_ns) / 1e6;
  };
  const bool unix_times = unix_ms(steps_.front().start) >= 1e12 && unix_ms(steps_.front().start) <= 1e14;
  std::vector<std::int64_t> step_starts, reach;  // reach[i]: the latest end of steps 0..i
  step_starts.reserve(steps_.size());
  reach.reserve(steps_.size());
  for (const auto& s : steps_) {
    // A range that starts before an earlier one ends: the trace's steps overlap.
    if (!reach.empty() && s.start < reach.back() && stats.overlapping_steps++ == 0) {
      stats.first_overlap_line = s.line;
      stats.first_overlap_step = s.step;
    }
    step_starts.push_back(s.start);
    reach.push_back(reach.empty() ? s.end : std::max(reach.back(), s.end));
  }
  // The step whose range holds `ts` (of overlapping ones, the one that started last), or
  // kNone. Without overlaps the loop looks at one step.
  auto step_of = [&](std::int64_t ts) -> std::int32_t {
    auto it = std::upper_bound(step_starts.begin(), step_starts.end(), ts);
    for (auto i = static_cast<std::int32_t>(it - step_starts.begin()) - 1; i >= 0 && reach[static_cast<std::size_t>(i)] > ts;
         --i)
      if (ts < steps_[static_cast<std::size_t>(i)].end) return i;
    return kNone;
  };

  // Annotations per thread, sorted by start (outer first on ties), and their parent on
  // the same thread: the innermost one still open at their start.
  const std::size_t na = annotations_.size();
  std::vector<std::uint32_t> order(na);
  for (std::uint32_t i = 0; i < na; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    const auto& a = annotations_[x];
    const auto& b = annotations_[y];
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return x < y;
  });
  struct ThreadSpan {
    std::size_t begin, end;  // range in `order`
  };
  std::unordered_map<std::int64_t, ThreadSpan> threads;
  std::vector<std::int32_t> parent_same(na, kNone);
  {
    std::vector<std::uint32_t> stack;
    for (std::size_t k = 0; k < na;) {
      const std::int64_t tid = annotations_[order[k]].tid;
      std::size_t e = k;
      stack.clear();
      for (; e < na && annotations_[order[e]].tid == tid; ++e) {
        const auto& a = annotations_[order[e]];
        while (!stack.empty() && annotations_[stack.back()].end <= a.start) stack.pop_back();
        parent_same[order[e]] = stack.empty() ? kNone : static_cast<std::int32_t>(stack.back());
        stack.push_back(order[e]);
      }
      threads[tid] = {k, e};
      k = e;
    }
  }
  std::vector<std::int64_t> sorted_starts(na);
  for (std::size_t k = 0; k < na; ++k) sorted_starts[k] = annotations_[order[k]].start;
  // The innermost annotation open on `tid` at `ts` (start <= ts < end), or kNone.
  auto innermost = [&](std::int64_t tid, std::int64_t ts) -> std::int32_t {
    auto t = threads.find(tid);
    if (t == threads.end()) return kNone;
    const auto first = sorted_starts.begin() + static_cast<std::ptrdiff_t>(t->second.begin);
    const auto last = sorted_starts.begin() + static_cast<std::ptrdiff_t>(t->second.end);
    auto it = std::upper_bound(first, last, ts);
    if (it == first) return kNone;
    auto a = static_cast<std::int32_t>(order[static_cast<std::size_t>(it - sorted_starts.begin() - 1)]);
    while (a != kNone && !(ts < annotations_[static_cast<std::size_t>(a)].end))
      a = parent_same[static_cast<std::size_t>(a)];
    return a;
  };

  // Steps and parents across threads: an annotation with no parent on its own thread,
  // on a thread other than its step's, hangs under what the step's thread had open.
  std::vector<std::int32_t> step_of_ann(na), parent(na);
  for (std::size_t i = 0; i < na; ++i) {
    const auto& a = annotations_[i];
    step_of_ann[i] = step_of(a.start);
    parent[i] = parent_same[i];
    if (parent[i] == kNone && step_of_ann[i] != kNone) {
      const auto& s = steps_[static_cast<std::size_t>(step_of_ann[i])];
      if (a.tid != s.tid) parent[i] = innermost(s.tid, a.start);
    }
  }

  // Regions are places, not names: a name called from several places on its thread
  // (torchrec's nccl:all_to_all under five different annotations) is one region per place,
  // so that a parent holds only its own children's calls. A place is the name and the
  // place of its parent on the same thread; a call at the top of a worker thread (its
  // parent found on the step's thread, by chance of timing) is one place per name.
  const PlaceTable places = make_places(parent, step_of_ann);
  stats.names_at_several_places = places.names_at_several_places;
  stats.places_not_used = places.by_name;
  if (!places.first_split_name.empty()) stats.first_split_name = places.first_split_name;

  // Host time, calls and parent per (step, place).
  std::vector<std::unordered_map<std::uint32_t, RegionAgg>> agg(steps_.size());
  std::vector<std::vector<std::uint32_t>> region_order(steps_.size());
  for (std::size_t i = 0; i < na; ++i) {
    const std::int32_t s = step_of_ann[i];
    if (s == kNone) {
      ++stats.annotations_outside_steps;
      continue;
    }
    const auto& a = annotations_[i];
    const std::uint32_t place = places.of[i];
    auto [it, inserted] = agg[static_cast<std::size_t>(s)].try_emplace(place);
    if (inserted) region_order[static_cast<std::size_t>(s)].push_back(place);
    RegionAgg& r = it->second;
    ++r.calls;
    if (!places.recursive[i]) r.host_ns += a.end - a.start;
    if (a.start < r.first_start) {
      r.first_start = a.start;
      const std::int32_t pp = places.place_parent[i];
      r.parent = pp == kNone ? kNone : static_cast<std::int32_t>(places.of[static_cast<std::size_t>(pp)]);
    }
  }
  for (std::size_t s = 0; s < steps_.size(); ++s)
    std::sort(region_order[s].begin(), region_order[s].end(),
              [&](std::uint32_t x, std::uint32_t y) { return agg[s][x].first_start < agg[s][y].first_start; });

  // GPU activity: find each one's launch, its step and the innermost annotation there.
  auto by_correlation = [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; };
  // (Stable: of launches sharing an id, the first in the trace is found, on every platform.)
  std::stable_sort(launches_.begin(), launches_.end(), by_correlation);
  std::stable_sort(flows_.begin(), flows_.end(), by_correlation);
  auto find_launch = [&](const std::deque<Launch>& v, std::int64_t corr) -> const Launch* {
    auto it = std::lower_bound(v.begin(), v.end(), Launch{corr, 0, 0}, by_correlation);
    return it != v.end() && it->correlation == corr ? &*it : nullptr;
  };
  struct Resolved {
    std::int32_t step, annotation;
    std::uint32_t gpu;
  };
  std::vector<Resolved> resolved;
  resolved.reserve(gpu_.size());
  std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> stream_index;  // (device, stream) -> dense index
  std::vector<std::uint32_t> stream_of(gpu_.size());
  std::vector<char> too_long(gpu_.size(), 0);  // not counted anywhere, gpu_busy_ms included
  // The steps' span [ms] (in double: ts may lie anywhere in +-9.2e15 us): GPU work launched
  // in a step ends before the profiler stops, soon after the last one (in the bundled
  // traces it ends within the steps). A collective may wait long after it for a late rank.
  std::int64_t first_start = INT64_MAX, last_end = INT64_MIN;
  for (const Step& st : steps_) first_start = std::min(first_start, st.start), last_end = std::max(last_end, st.end);
  stats.steps_span_ms =
      steps_.empty() ? 0.0 : (static_cast<double>(last_end) - static_cast<double>(first_start)) / 1e6;
  for (std::uint32_t g = 0; g < gpu_.size(); ++g) {
    const auto& op = gpu_[g];
    const double dur_ms = static_cast<double>(op.end - op.start) / 1e6;  // (dur <= 1e12 ms: no overflow)
    if (!steps_.empty() && dur_ms > stats.steps_span_ms + kGpuLongestMs) {
      ++stats.gpu_ops_too_long;
      stats.longest_too_long_ms = std::max(stats.longest_too_long_ms, dur_ms);
      too_long[g] = 1;
      continue;
    }
    if (!steps_.empty() && dur_ms > stats.steps_span_ms + kGpuLongMs) {
      ++stats.gpu_ops_long;
      stats.longest_long_ms = std::max(stats.longest_long_ms, dur_ms);
    }
    stream_of[g] = stream_index.try_emplace({op.device, op.stream}, static_cast<std::uint32_t>(stream_index.size()))
                       .first->second;
    const Launch* l = op.has_correlation ? find_launch(launches_, op.correlation) : nullptr;
    if (!l && op.has_correlation) l = find_launch(flows_, op.correlation);
    if (!l) {
      // No launch in the trace (the profiler lost it): the step is the one the activity
      // started in on the GPU; no region can be charged.
      ++stats.gpu_ops_without_launch;
      if (const std::int32_t s = step_of(op.start); s != kNone) resolved.push_back({s, kNone, g});
      else ++stats.gpu_ops_outside_steps;
      continue;
    }
    if (op.start < l->ts - 1'000'000) {
      ++stats.gpu_ops_before_launch;
      stats.most_before_launch_ms = std::max(stats.most_before_launch_ms, static_cast<double>(l->ts - op.start) / 1e6);
    }
    const std::int32_t s = step_of(l->ts);
    if (s == kNone) {
      ++stats.gpu_ops_outside_steps;
      continue;
    }
    std::int32_t a = innermost(l->tid, l->ts);
    const auto& st = steps_[static_cast<std::size_t>(s)];
    if (a == kNone && l->tid != st.tid) a = innermost(st.tid, l->ts);
    resolved.push_back({s, a, g});
  }
  std::stable_sort(resolved.begin(), resolved.end(), [](const Resolved& x, const Resolved& y) { return x.step < y.step; });

  std::optional<NameTable::Id> nccl_id;
  const NameTable::Id c_kernels = counters.intern("gpu_kernels");
  const NameTable::Id c_memcpys = counters.intern("gpu_memcpys");
  const NameTable::Id c_memsets = counters.intern("gpu_memsets");
  const NameTable::Id c_nccl = counters.intern("nccl_kernels");
  std::vector<NameTable::Id> region_id(places.display.size());
  for (std::size_t i = 0; i < places.display.size(); ++i) region_id[i] = regions.intern(places.display[i]);

  // Every GPU activity, whichever step launched it, merged into one union over every
  // device and stream: a step's `gpu_busy_ms` is that union within its range. (Not one
  // too long to have run in this trace: it had made a step busy throughout.)
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;
  busy.reserve(gpu_.size());
  for (std::size_t g = 0; g < gpu_.size(); ++g)
    if (!too_long[g]) busy.emplace_back(gpu_[g].start, gpu_[g].end);
  merge_spans(busy);
  auto busy_within = [&](std::int64_t start, std::int64_t end) {
    std::int64_t ns = 0;
    auto it = std::upper_bound(busy.begin(), busy.end(), start,
                               [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& b) { return t < b.second; });
    for (; it != busy.end() && it->first < end; ++it) ns += std::min(end, it->second) - std::max(start, it->first);
    return ns;
  };

  std::vector<Charge> charges;
  std::vector<std::pair<std::int64_t, std::int64_t>> comm_spans, compute_spans;
  std::optional<NameTable::Id> exposed_id;
  std::vector<std::uint64_t> charged(places.display.size(), 0);
  std::uint64_t stamp = 0;
  std::size_t r = 0;
  out.reserve(steps_.size());
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    std::int64_t kernels = 0, memcpys = 0, memsets = 0, nccl_kernels = 0, nccl_ns = -1;
    charges.clear();
    comm_spans.clear();
    compute_spans.clear();
    for (; r < resolved.size() && resolved[r].step == static_cast<std::int32_t>(s); ++r) {
      const auto& op = gpu_[resolved[r].gpu];
      const std::uint32_t stream = stream_of[resolved[r].gpu];
      switch (op.kind) {
        case GpuKind::kKernel: ++kernels; break;
        case GpuKind::kMemcpy: ++memcpys; break;
        case GpuKind::kMemset: ++memsets; break;
      }
      if (op.nccl) {
        ++nccl_kernels;
        // One union over every stream (N of nccl_exposed): the communication region's
        // time is subtracted from the update's to give a rank's own work, and NCCL kernels
        // on two concurrent streams (FSDP's all-gather beside its reduce-scatter) summed
        // exceeded the update and turned the rank comparison off.
        charges.push_back({kNcclSlot, 0, op.start, op.end});
        comm_spans.emplace_back(op.start, op.end);
      } else if (op.kind == GpuKind::kKernel) {
        compute_spans.emplace_back(op.start, op.end);
      }
      ++stamp;  // each place on the launch's chain is charged once
      for (std::int32_t a = resolved[r].annotation; a != kNone; a = parent[static_cast<std::size_t>(a)]) {
        const auto ai = static_cast<std::size_t>(a);
        if (step_of_ann[ai] != static_cast<std::int32_t>(s)) break;
        const std::uint32_t place = places.of[ai];
        if (charged[place] == stamp) continue;
        charged[place] = stamp;
        charges.push_back({place, stream, op.start, op.end});
      }
    }
    // Union of the intervals per (region, stream), summed over streams (the nccl slot's
    // are all on "stream" 0: one union).
    std::sort(charges.begin(), charges.end(), [](const Charge& x, const Charge& y) {
      if (x.region != y.region) return x.region < y.region;
      if (x.stream != y.stream) return x.stream < y.stream;
      return x.start < y.start;
    });
    for (std::size_t i = 0; i < charges.size();) {
      const std::uint32_t region = charges[i].region;
      std::int64_t region_busy = 0;
      while (i < charges.size() && charges[i].region == region) {
        const std::uint32_t stream = charges[i].stream;
        std::int64_t cur_start = charges[i].start, cur_end = charges[i].end;
        for (; i < charges.size() && charges[i].region == region && charges[i].stream == stream; ++i) {
          if (charges[i].start > cur_end) {
            region_busy += cur_end - cur_start;
            cur_start = charges[i].start;
          }
          cur_end = std::max(cur_end, charges[i].end);
        }
        region_busy += cur_end - cur_start;
      }
      if (region == kNcclSlot) nccl_ns = region_busy;
      else agg[s][region].device_ns = region_busy;
    }

    UpdateRecord u;
    u.step = st.step;
    u.wall_ms = static_cast<double>(st.end - st.start) / 1e6;
    u.source = {.file = file_index, .line = st.line};
    if (unix_times) u.extra.push_back({std::string(schema::kStartUnixMs), fmt::format("{:.3f}", unix_ms(st.start))});
    if (!busy.empty()) {  // (exact: integral ns written as ms with 6 decimals)
      const std::int64_t ns = busy_within(st.start, st.end);
      u.extra.push_back({std::string(schema::kGpuBusyMs), fmt::format("{}.{:06}", ns / 1'000'000, ns % 1'000'000)});
    }
    for (std::uint32_t place : region_order[s]) {
      const RegionAgg& a = agg[s][place];
      RegionSample rs;
      rs.region = region_id[place];
      rs.host_ms = static_cast<double>(a.host_ns) / 1e6;
      rs.calls = a.calls;
      rs.parent = a.parent == kNone ? kTopLevel : region_id[static_cast<std::size_t>(a.parent)];
      if (a.device_ns >= 0) rs.device_ms = static_cast<double>(a.device_ns) / 1e6;
      u.regions.push_back(rs);
    }
    if (nccl_kernels > 0) {
      RegionSample rs;
      if (!nccl_id) nccl_id = regions.intern(nccl_region);
      rs.region = *nccl_id;
      rs.device_ms = static_cast<double>(nccl_ns) / 1e6;
      rs.calls = nccl_kernels;
      rs.parent = kTopLevel;
      u.regions.push_back(rs);
      if (!exposed_name.empty()) {
        RegionSample ex;
        if (!exposed_id) exposed_id = regions.intern(exposed_name);
        ex.region = *exposed_id;
        ex.device_ms = static_cast<double>(exposed_ns(comm_spans, compute_spans)) / 1e6;
        ex.calls = nccl_kernels;
        ex.parent = *nccl_id;
        u.regions.push_back(ex);
      }
    }
    u.counters = {{c_kernels, static_cast<double>(kernels)},
                  {c_memcpys, static_cast<double>(memcpys)},
                  {c_memsets, static_cast<double>(memsets)},
                  {c_nccl, static_cast<double>(nccl_kernels)}};
    out.push_back(std::move(u));
  }
  std::stable_sort(out.begin(), out.end(), [](const UpdateRecord& a, const UpdateRecord& b) { return a.step < b.step; });
  return out;
}

}  // namespace stepprof::detail
