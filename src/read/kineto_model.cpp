#include "kineto_model.hpp"

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

void KinetoModel::add_annotation(std::string_view name, std::int64_t tid, std::int64_t start_ns,
                                 std::int64_t end_ns) {
  annotations_.push_back({tid, start_ns, end_ns, names_.intern(name)});
}

void KinetoModel::add_launch(std::int64_t correlation, std::int64_t tid, std::int64_t ts_ns) {
  launches_.push_back({correlation, tid, ts_ns});
}

void KinetoModel::add_flow(std::int64_t id, std::int64_t tid, std::int64_t ts_ns) { flows_.push_back({id, tid, ts_ns}); }

void KinetoModel::add_gpu(GpuKind kind, bool nccl, std::int64_t correlation, std::int64_t device,
                          std::int64_t stream, std::int64_t start_ns, std::int64_t end_ns) {
  gpu_.push_back({correlation, device, stream, start_ns, end_ns, kind, nccl});
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

KinetoModel::PlaceTable KinetoModel::make_places(const std::vector<std::int32_t>& place_parent,
                                                 const std::vector<std::int32_t>& step_of_ann) const {
  constexpr std::int32_t kUnset = -2;
  // A qualified name longer than this is not qualified further (deep recursion in a
  // crafted trace would make names quadratic in the depth): "name (place N)" instead.
  constexpr std::size_t kMaxQualifier = 256;
  const std::size_t na = annotations_.size();
  struct Place {
    std::uint32_t name;
    std::int32_t parent;  // place id, kNone: none on the annotation's thread
  };
  std::vector<Place> list;
  std::map<std::pair<std::uint32_t, std::int32_t>, std::int32_t> ids;
  std::vector<std::uint32_t> places_of_name(names_.size(), 0);
  PlaceTable t;
  // The parent that places an annotation: the enclosing one when it is on the same thread.
  auto placing_parent = [&](std::size_t i) -> std::int32_t {
    const std::int32_t p = place_parent[i];
    return p != kNone && annotations_[static_cast<std::size_t>(p)].tid == annotations_[i].tid ? p : kNone;
  };
  std::vector<std::int32_t> of(na, kUnset);
  std::vector<std::size_t> pending;  // an annotation's unplaced ancestors, innermost first
  for (std::size_t i = 0; i < na; ++i) {
    if (step_of_ann[i] == kNone || of[i] != kUnset) continue;
    pending.clear();
    for (std::int32_t j = static_cast<std::int32_t>(i); j != kNone && of[static_cast<std::size_t>(j)] == kUnset;
         j = placing_parent(static_cast<std::size_t>(j)))
      pending.push_back(static_cast<std::size_t>(j));
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      const std::int32_t p = placing_parent(*it);
      const std::int32_t parent_place = p == kNone ? kNone : of[static_cast<std::size_t>(p)];
      const std::uint32_t name = annotations_[*it].name;
      const auto [pos, added] = ids.try_emplace({name, parent_place}, static_cast<std::int32_t>(list.size()));
      if (added) {
        list.push_back({name, parent_place});
        if (++places_of_name[name] == 2 && t.names_at_several_places++ == 0)
          t.first_split_name = std::string(names_.name(name));
      }
      of[*it] = pos->second;
    }
  }
  t.of.assign(na, 0);
  for (std::size_t i = 0; i < na; ++i)
    if (of[i] >= 0) t.of[i] = static_cast<std::uint32_t>(of[i]);
  // Names, parents first (a place's parent has a smaller id). A name in the trace may read
  // like a qualified one ("c (in a)"): a taken name gets " [2]", " [3]", ...
  t.display.resize(list.size());
  std::unordered_set<std::string> used;
  std::unordered_map<std::string, std::size_t> next_suffix;
  for (std::size_t p = 0; p < list.size(); ++p) {
    const std::string_view name = names_.name(list[p].name);
    std::string d;
    if (places_of_name[list[p].name] < 2 || list[p].parent == kNone) d = std::string(name);
    else if (const auto& outer = t.display[static_cast<std::size_t>(list[p].parent)]; outer.size() <= kMaxQualifier)
      d = fmt::format("{} (in {})", name, outer);
    else
      d = fmt::format("{} (place {})", name, p);
    if (!used.insert(d).second) {
      std::size_t& k = next_suffix.try_emplace(d, 2).first->second;
      std::string alt;
      do alt = fmt::format("{} [{}]", d, k++);
      while (!used.insert(alt).second);
      d = std::move(alt);
    }
    t.display[p] = std::move(d);
  }
  return t;
}

std::vector<UpdateRecord> KinetoModel::build(NameTable& regions, NameTable& counters, std::string_view nccl_region,
                                             std::uint32_t file_index, KinetoStats& stats) {
  std::vector<UpdateRecord> out;
  if (steps_.empty()) return out;
  std::stable_sort(steps_.begin(), steps_.end(), [](const Step& a, const Step& b) { return a.start < b.start; });
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

  // Each annotation's place: the nearest enclosing annotation of another name in its step
  // (`place_parent`, kNone: top level), and whether one of its own name encloses it nearer
  // than that (a recursive call: the same region, its time counted once).
  std::vector<std::int32_t> place_parent(na, kNone);
  std::vector<std::uint8_t> recursive(na, 0);
  for (std::size_t i = 0; i < na; ++i) {
    const std::int32_t s = step_of_ann[i];
    if (s == kNone) continue;
    for (std::int32_t p = parent[i]; p != kNone; p = parent[static_cast<std::size_t>(p)]) {
      const auto pi = static_cast<std::size_t>(p);
      if (step_of_ann[pi] != s) break;
      if (annotations_[pi].name != annotations_[i].name) {
        place_parent[i] = p;
        break;
      }
      recursive[i] = 1;
    }
  }
  // Regions are places, not names: a name called from several places on its thread
  // (torchrec's nccl:all_to_all under five different annotations) is one region per place,
  // so that a parent holds only its own children's calls. A place is the name and the
  // place of its parent on the same thread; a parent found on the step's thread (an
  // annotation at the top of a worker thread) does not split a name, as what is open
  // there at the time is chance. Place ids are made parents first.
  const PlaceTable places = make_places(place_parent, step_of_ann);
  stats.names_at_several_places = places.names_at_several_places;
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
    if (!recursive[i]) r.host_ns += a.end - a.start;
    if (a.start < r.first_start) {
      r.first_start = a.start;
      const std::int32_t pp = place_parent[i];
      r.parent = pp == kNone ? kNone : static_cast<std::int32_t>(places.of[static_cast<std::size_t>(pp)]);
    }
  }
  for (std::size_t s = 0; s < steps_.size(); ++s)
    std::sort(region_order[s].begin(), region_order[s].end(),
              [&](std::uint32_t x, std::uint32_t y) { return agg[s][x].first_start < agg[s][y].first_start; });

  // GPU activity: find each one's launch, its step and the innermost annotation there.
  auto by_correlation = [](const Launch& a, const Launch& b) { return a.correlation < b.correlation; };
  std::sort(launches_.begin(), launches_.end(), by_correlation);
  std::sort(flows_.begin(), flows_.end(), by_correlation);
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
  for (std::uint32_t g = 0; g < gpu_.size(); ++g) {
    const auto& op = gpu_[g];
    stream_of[g] = stream_index.try_emplace({op.device, op.stream}, static_cast<std::uint32_t>(stream_index.size()))
                       .first->second;
    const Launch* l = find_launch(launches_, op.correlation);
    if (!l) l = find_launch(flows_, op.correlation);
    if (!l) {
      // No launch in the trace (the profiler lost it): the step is the one the activity
      // started in on the GPU; no region can be charged.
      ++stats.gpu_ops_without_launch;
      if (const std::int32_t s = step_of(op.start); s != kNone) resolved.push_back({s, kNone, g});
      else ++stats.gpu_ops_outside_steps;
      continue;
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

  std::vector<Charge> charges;
  std::vector<std::uint32_t> chain;
  std::size_t r = 0;
  out.reserve(steps_.size());
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    std::int64_t kernels = 0, memcpys = 0, memsets = 0, nccl_kernels = 0, nccl_ns = -1;
    charges.clear();
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
        charges.push_back({kNcclSlot, stream, op.start, op.end});
      }
      chain.clear();
      for (std::int32_t a = resolved[r].annotation; a != kNone; a = parent[static_cast<std::size_t>(a)]) {
        const auto ai = static_cast<std::size_t>(a);
        if (step_of_ann[ai] != static_cast<std::int32_t>(s)) break;
        const std::uint32_t place = places.of[ai];
        if (std::find(chain.begin(), chain.end(), place) == chain.end()) chain.push_back(place);
      }
      for (std::uint32_t place : chain) charges.push_back({place, stream, op.start, op.end});
    }
    // Union of the intervals per (region, stream), summed over streams.
    std::sort(charges.begin(), charges.end(), [](const Charge& x, const Charge& y) {
      if (x.region != y.region) return x.region < y.region;
      if (x.stream != y.stream) return x.stream < y.stream;
      return x.start < y.start;
    });
    for (std::size_t i = 0; i < charges.size();) {
      const std::uint32_t region = charges[i].region;
      std::int64_t busy = 0;
      while (i < charges.size() && charges[i].region == region) {
        const std::uint32_t stream = charges[i].stream;
        std::int64_t cur_start = charges[i].start, cur_end = charges[i].end;
        for (; i < charges.size() && charges[i].region == region && charges[i].stream == stream; ++i) {
          if (charges[i].start > cur_end) {
            busy += cur_end - cur_start;
            cur_start = charges[i].start;
          }
          cur_end = std::max(cur_end, charges[i].end);
        }
        busy += cur_end - cur_start;
      }
      if (region == kNcclSlot) nccl_ns = busy;
      else agg[s][region].device_ns = busy;
    }

    UpdateRecord u;
    u.step = st.step;
    u.wall_ms = static_cast<double>(st.end - st.start) / 1e6;
    u.source = {file_index, st.line};
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
