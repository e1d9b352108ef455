#include "stepprof/analysis/timeline.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "stepprof/analysis/series.hpp"
#include "stepprof/schema.hpp"
#include "../util/text.hpp"

namespace stepprof {
namespace {

std::int64_t to_us(double ms) { return std::llround(ms * 1e3); }

// A Unix time in milliseconds is taken up to this (the year 5138): beyond it, the
// microseconds from the earliest start would not fit the trace's 64-bit timestamps.
constexpr double kMaxUnixMs = schema::kMaxStartUnixMs;

// A field's JSON text for a message: its first 40 bytes and "..." when longer, cut before
// a UTF-8 continuation byte (so that no character is split).
std::string shown_value(const std::string& json) {
  if (json.size() <= 40) return json;
  return std::string(detail::prefix_at_character(json, 40)) + "...";
}

// The update's `start_unix_ms`: absent (nullopt, `bad` empty), or why it cannot be used.
std::optional<double> start_unix_ms(const UpdateRecord& u, std::string& bad) {
  const RawField* f = u.find_extra(schema::kStartUnixMs);
  if (!f) return std::nullopt;
  const auto v = u.extra_number(schema::kStartUnixMs);
  if (!v || !std::isfinite(*v) || *v < 0 || *v > kMaxUnixMs) {
    bad = fmt::format("{}step {} has start_unix_ms {}: expected a Unix time in milliseconds (0 to 1e14)",
                      u.rank ? fmt::format("rank {} ", *u.rank) : std::string(), u.step, shown_value(f->json));
    return std::nullopt;
  }
  return v;
}

// Where each update starts on the time axis [us], per rank (same order as data.ranks).
struct Starts {
  std::vector<std::vector<std::int64_t>> us;
  bool real = false;
  std::string note;
  double span_ms = 0;  // laid out one after another: the steps' time added up [ms]
};

Starts synthetic_starts(const Dataset& data) {
  std::map<std::int64_t, double> slowest;  // step -> largest wall_ms over ranks
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates) slowest[u.step] = std::max(slowest[u.step], u.wall_ms);
  std::map<std::int64_t, std::int64_t> at;
  std::int64_t t = 0;
  Starts s;
  for (const auto& [step, wall] : slowest) s.span_ms += wall;
  if (s.span_ms * 1e3 > kMaxTraceSpanUs) return s;  // (build_timeline says so; the sum would overflow)
  for (const auto& [step, wall] : slowest) {
    at[step] = t;
    t += to_us(wall);
  }
  for (const auto& r : data.ranks) {
    auto& v = s.us.emplace_back();
    for (const auto& u : r.updates) v.push_back(at[u.step]);
  }
  return s;
}

// The logged starts, when every update has a usable one; else nullopt, and `why_not` says
// why unless no update has one at all (the usual case: the recorder does not write it).
// "FILE:LINE: " of update `u`, for messages about it.
std::string where(const Dataset& data, const UpdateRecord& u) {
  return fmt::format("{}:{}: ", u.source.file < data.files.size() ? data.files[u.source.file] : std::string("?"),
                     u.source.line);
}

std::optional<Starts> real_starts(const Dataset& data, std::string& why_not) {
  std::optional<double> first;
  const UpdateRecord* without = nullptr;  // the first update without one
  std::vector<std::vector<double>> ms(data.ranks.size());
  for (std::size_t ri = 0; ri < data.ranks.size(); ++ri)
    for (const auto& u : data.ranks[ri].updates) {
      std::string bad;
      const auto t = start_unix_ms(u, bad);
      if (!bad.empty()) {
        why_not = where(data, u) + bad;
        return std::nullopt;
      }
      if (!t) {
        if (!without) without = &u;
        continue;
      }
      ms[ri].push_back(*t);
      first = std::min(first.value_or(*t), *t);
    }
  if (without) {
    if (first)
      why_not = fmt::format("{}{}step {} has no start_unix_ms, while other updates have one", where(data, *without),
                            without->rank ? fmt::format("rank {} ", *without->rank) : std::string(), without->step);
    return std::nullopt;
  }
  Starts s;
  s.real = true;
  for (std::size_t ri = 0; ri < data.ranks.size(); ++ri) {
    const auto& r = data.ranks[ri];
    auto& v = s.us.emplace_back();
    for (std::size_t k = 0; k < r.updates.size(); ++k) {
      const auto& u = r.updates[k];
      v.push_back(to_us(ms[ri][k] - *first));
      if (k == 0) continue;
      // A start within 1 ms before the previous update's end is the rounding of times
      // logged in whole (or rounded) milliseconds: the update starts at that end.
      constexpr double kRoundingMs = 1.0;
      const std::int64_t prev_end = v[k - 1] + to_us(r.updates[k - 1].wall_ms);
      if (v[k] >= prev_end) continue;
      if (prev_end - v[k] <= to_us(kRoundingMs)) {
        v[k] = prev_end;
        continue;
      }
      why_not = fmt::format("{}the logged start_unix_ms of {}step {} falls {:.1f} ms inside step {}", where(data, u),
                            r.rank ? fmt::format("rank {} ", *r.rank) : std::string(), u.step,
                            static_cast<double>(prev_end - v[k]) / 1e3, r.updates[k - 1].step);
      return std::nullopt;
    }
  }
  // The axis from the earliest start to the latest end must fit a trace viewer's
  // (kMaxTraceSpanUs): start_unix_ms may be anywhere from 0 to 1e14 ms.
  double span_us = 0;
  for (std::size_t ri = 0; ri < data.ranks.size(); ++ri)
    for (std::size_t k = 0; k < s.us[ri].size(); ++k)
      span_us = std::max(span_us, static_cast<double>(s.us[ri][k]) + data.ranks[ri].updates[k].wall_ms * 1e3);
  if (span_us > kMaxTraceSpanUs) {
    why_not = fmt::format("the logged start_unix_ms span {:.3g} years, more than a trace's time axis holds (2^53 "
                          "us, 285 years)",
                          span_us / 1e6 / 3.15576e7);
    return std::nullopt;
  }
  return s;
}

// Lays out one update on one clock's track with the nesting.
class NestedLayout {
 public:
  NestedLayout(const AnalysisInput& in, Clock clock, std::size_t& shrunk)
      : in_(in), device_(clock == Clock::kDevice), shrunk_(shrunk) {
    // Every node's place in a depth-first walk of the nesting (definition order).
    std::vector<std::string_view> stack{""};
    while (!stack.empty()) {
      const std::string_view at = stack.back();
      stack.pop_back();
      if (!at.empty()) order_.emplace(at, order_.size());
      const auto kids = in_.hierarchy->children(at);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back((*it)->name);
    }
  }

  void update(const UpdateRecord& u, std::int64_t start, std::vector<TimelineSlice>& out) {
    TimelineSlice root{{}, start, to_us(u.wall_ms), u.step, true, u.wall_ms, {}, {}};
    out.push_back(root);
    place(u, "", start, root.dur_us, 0, out);
  }

  // A background region (role "background": another thread's, alongside the update) and
  // its nest, on a track of its own from the update's start: the update's track does not
  // hold it, as its time is not a part of the update's. Shrunk to the update's wall time
  // (args.scale), as a region outside the nesting is, so that updates do not overlap.
  void background(const UpdateRecord& u, const HierarchyNode& node, std::int64_t start,
                  std::vector<TimelineSlice>& out) {
    const RegionSample* s = nullptr;
    const auto ms = time_of(u, node.name, s);
    // Absent (a wrapper of a --hierarchy file around another thread's regions): its
    // regions in its place, within the update's time (they were dropped from the trace).
    if (!ms) return place(u, node.name, start, to_us(u.wall_ms), 0, out);
    const std::int64_t recorded = to_us(*ms), wall = to_us(u.wall_ms);
    TimelineSlice slice{in_.data.regions.name(s->region), start, std::min(recorded, wall), u.step, false, *ms,
                        s->calls, {}};
    if (recorded > wall) {
      slice.scale = static_cast<double>(wall) / static_cast<double>(recorded);
      ++shrunk_;
    }
    const std::int64_t dur = slice.dur_us;
    out.push_back(std::move(slice));
    place(u, node.name, start, dur, 1, out);
  }

 private:
  struct Item {
    const RegionSample* sample;
    std::string_view name;  // owned by the hierarchy
    double ms;
  };

  // A background region under a parent that is not one: on a track of its own (background()).
  bool starts_background(const HierarchyNode& node, std::string_view parent) const {
    return node.role == RegionRole::kBackground && !in_.hierarchy->in_background(parent);
  }

  // The time of region `name` in `u` on this clock, and its sample; nullopt when absent.
  std::optional<double> time_of(const UpdateRecord& u, std::string_view name, const RegionSample*& s) const {
    const auto id = in_.region(name);
    s = id ? u.region(*id) : nullptr;
    return s ? (device_ ? s->device_ms : s->host_ms) : std::nullopt;
  }

  // The regions laid out directly under `parent` with many children (more than the update
  // has regions: names made with the step in them, one child per update): from the
  // update's own regions, each laid out under its nearest ancestor with a time, in the
  // walk's order. (Going over every child in every update made the trace quadratic in the
  // updates.)
  void items_of_many(const UpdateRecord& u, std::string_view parent, std::vector<Item>& out) const {
    std::vector<std::pair<std::size_t, Item>> found;
    for (const RegionSample& s : u.regions) {
      const auto t = device_ ? s.device_ms : s.host_ms;
      const auto name = in_.data.regions.name(s.region);
      const HierarchyNode* node = t ? in_.hierarchy->find(name) : nullptr;
      // (A background region and its nest are on tracks of their own.)
      if (!node || (in_.hierarchy->in_background(node->name) && !in_.hierarchy->in_background(parent))) continue;
      std::string_view up = node->parent;
      const RegionSample* ignored = nullptr;
      while (up != parent && !up.empty() && !time_of(u, up, ignored)) {
        const HierarchyNode* n = in_.hierarchy->find(up);
        up = n ? std::string_view(n->parent) : std::string_view();
      }
      if (up == parent) found.emplace_back(order_.at(node->name), Item{&s, node->name, *t});
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& f : found) out.push_back(f.second);
  }

  // The regions laid out directly under `parent`: its children that have a time on this
  // clock, with the children of an absent child in its place, in the walk's order. Absent
  // children are walked without recursion and count for no level of kMaxDepth: 257
  // wrapper regions a log never has (a --hierarchy file's) left no region in the trace.
  void items(const UpdateRecord& u, std::string_view parent, std::vector<Item>& out) const {
    struct Todo {
      const HierarchyNode* node;
      std::string_view parent;
    };
    std::vector<Todo> todo;
    auto open = [&](std::string_view of) {
      const auto kids = in_.hierarchy->children(of);
      if (kids.size() > u.regions.size()) return items_of_many(u, of, out);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back({*it, of});
    };
    open(parent);
    while (!todo.empty()) {
      const Todo t = todo.back();
      todo.pop_back();
      if (starts_background(*t.node, t.parent)) continue;
      const auto id = in_.region(t.node->name);
      const RegionSample* s = id ? u.region(*id) : nullptr;
      const auto time = s ? (device_ ? s->device_ms : s->host_ms) : std::nullopt;
      if (time) out.push_back({s, t.node->name, *time});
      else open(t.node->name);
    }
  }

  void place(const UpdateRecord& u, std::string_view parent, std::int64_t start, std::int64_t avail, int depth,
             std::vector<TimelineSlice>& out) {
    if (depth >= kMaxDepth) return;
    std::vector<Item> kids;
    items(u, parent, kids);
    // The children one after another from the parent's start, each its time rounded to
    // microseconds when those fit the parent; shrunk by one factor only when their times
    // add up to more than the parent's by more than half a microsecond: a nesting
    // violation (docs/exports.md). Otherwise, when shrunk or when the rounded times alone
    // overrun the parent (1.0006 + 1.0006 + 0.9988 ms in 3 ms: 3001 us), each child ends
    // at its running sum (times the factor), rounded: within a microsecond of its rounded
    // time, the last ending by the parent's end. (Cutting the overrun from the last child
    // cut 20 children of 499.6 us in 9,992 us to 492 us for the last.)
    double total_us = 0;
    std::int64_t rounded_us = 0;
    for (const auto& k : kids) {
      total_us += k.ms * 1e3;
      rounded_us += to_us(k.ms);
    }
    const bool shrink = total_us > static_cast<double>(avail) + 0.5;
    const bool running = shrink || rounded_us > avail;
    const double factor = shrink ? static_cast<double>(avail) / total_us : 1.0;
    std::int64_t cursor = start;
    double sum_us = 0;
    for (const auto& k : kids) {
      const std::int64_t recorded = to_us(k.ms);
      sum_us += k.ms * 1e3;
      const std::int64_t end = running ? start + std::llround(sum_us * factor) : cursor + recorded;
      const std::int64_t dur = std::max<std::int64_t>(0, std::min(end, start + avail) - cursor);
      TimelineSlice s{in_.data.regions.name(k.sample->region), cursor, dur, u.step, false, k.ms, k.sample->calls, {}};
      if (shrink && dur < recorded) {
        s.scale = static_cast<double>(dur) / static_cast<double>(recorded);
        ++shrunk_;
      }
      out.push_back(std::move(s));
      place(u, k.name, cursor, dur, depth + 1, out);
      cursor += dur;
    }
  }

  // Levels of the nesting laid out; deeper regions are left out (a crafted trace nested
  // 50,000 deep overflowed the stack here; no trace viewer shows such depths).
  static constexpr int kMaxDepth = 256;

  const AnalysisInput& in_;
  bool device_;
  std::size_t& shrunk_;
  std::unordered_map<std::string_view, std::size_t> order_;  // node name -> depth-first place
};

std::string clock_label(Clock c) { return c == Clock::kDevice ? "device stream (cuda_stream_ms)" : "host (cpu_call_ms)"; }

std::vector<TimelineCounter> counters(const AnalysisInput& in, const RankLog& rank, const std::vector<std::int64_t>& starts) {
  namespace c = schema::counter;
  struct Group {
    std::string name;
    std::vector<std::string> series;
    std::vector<std::optional<NameTable::Id>> ids;
    std::vector<std::optional<NameTable::Id>> path_region;  // code-path groups: the path's region
  };
  std::vector<Group> groups;
  std::set<std::string, std::less<>> grouped;
  auto add_group = [&](std::string name, const std::vector<std::string_view>& names) {
    Group g{std::move(name), {}, {}, {}};
    for (auto n : names)
      if (auto id = in.counter(n)) {
        g.series.emplace_back(n);
        g.ids.push_back(id);
        g.path_region.emplace_back();
        grouped.emplace(n);
      }
    if (!g.series.empty()) groups.push_back(std::move(g));
  };
  add_group("tokens", {c::kTokenSlots, c::kValidTokens, c::kSupervisedTokens});
  add_group("work", {c::kSamples, c::kFrames, c::kMicroSteps});
  if (in.hierarchy) {
    for (const auto& [group, nodes] : in.hierarchy->alternatives()) {
      Group g{fmt::format("samples per code path ({})", group), {}, {}, {}};
      for (const auto* node : nodes) {
        const auto id = in.counter(node->samples());
        const auto region = in.region(node->name);
        if (!id && !region) continue;
        g.series.push_back(node->name);
        g.ids.push_back(id);
        g.path_region.push_back(region);
        grouped.insert(node->samples());
      }
      if (!g.series.empty()) groups.push_back(std::move(g));
    }
  }
  for (NameTable::Id id = 0; id < in.data.counters.size(); ++id) {
    const auto name = in.data.counters.name(id);
    if (!grouped.contains(name)) groups.push_back({fmt::format("counter {}", name), {std::string(name)}, {id}, {{}}});
  }
  const auto slots = in.counter(c::kTokenSlots), valid = in.counter(c::kValidTokens);

  std::vector<TimelineCounter> out;
  TimelineCounter padding{"padding fraction", {"padding_fraction"}, {}};
  for (std::size_t k = 0; k < rank.updates.size(); ++k)
    if (auto f = update_padding_fraction(rank.updates[k], slots, valid))
      padding.samples.push_back({starts[k], rank.updates[k].step, {f}});
  for (const Group& g : groups) {
    TimelineCounter tc{g.name, g.series, {}};
    for (std::size_t k = 0; k < rank.updates.size(); ++k) {
      const UpdateRecord& u = rank.updates[k];
      TimelineCounter::Sample s{starts[k], u.step, {}};
      bool any = false;
      for (std::size_t i = 0; i < g.ids.size(); ++i) {
        std::optional<double> v = g.ids[i] ? u.counter(*g.ids[i]) : std::nullopt;
        if (!v && g.path_region[i] && !u.region(*g.path_region[i])) v = 0.0;  // the path did not run
        any = any || v.has_value();
        s.values.push_back(v);
      }
      if (any) tc.samples.push_back(std::move(s));
    }
    if (!tc.samples.empty()) out.push_back(std::move(tc));
  }
  if (!padding.samples.empty()) {  // right after "tokens" and "work"
    std::size_t at = 0;
    while (at < out.size() && (out[at].name == "tokens" || out[at].name == "work")) ++at;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), std::move(padding));
  }
  return out;
}

}  // namespace

std::optional<double> logged_start_unix_ms(const UpdateRecord& u) {
  std::string bad;
  return start_unix_ms(u, bad);
}

Timeline build_timeline(const AnalysisInput& in, const std::vector<RankRange>& only_ranks) {
  Timeline t;
  const Dataset& data = in.data;
  t.nesting_known = in.hierarchy != nullptr;

  std::string why_not;
  auto real = real_starts(data, why_not);
  const Starts starts = real ? std::move(*real) : synthetic_starts(data);
  if (!starts.real && starts.span_ms * 1e3 > kMaxTraceSpanUs) {
    t.span_too_long_ms = starts.span_ms;
    return t;
  }
  t.real_timestamps = starts.real;
  if (starts.real)
    t.notes.push_back("updates start at their logged start_unix_ms, relative to the earliest");
  else
    t.notes.push_back(
        "updates laid out one after another: update k starts on every rank when the slowest rank's update k-1 "
        "ended (the logs hold per-update sums, not timestamps)");
  if (!why_not.empty()) t.notes.push_back("start_unix_ms not used: " + why_not);
  t.timestamps_not_used = why_not;

  // Clocks present, and the regions the nesting does not place.
  bool host = false, device = false;
  std::vector<NameTable::Id> unplaced;
  std::vector<bool> seen(data.regions.size(), false);
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates)
      for (const auto& s : u.regions) {
        host = host || s.host_ms.has_value();
        device = device || s.device_ms.has_value();
        seen[s.region] = true;
      }
  for (NameTable::Id id = 0; id < data.regions.size(); ++id)
    if (seen[id] && (!in.hierarchy || !in.hierarchy->find(data.regions.name(id)))) unplaced.push_back(id);
  std::vector<Clock> clocks;
  if (host) clocks.push_back(Clock::kHost);
  if (device) clocks.push_back(Clock::kDevice);

  if (in.hierarchy)
    t.notes.push_back(fmt::format(
        "regions nested by {}: children laid out one after another from their parent's start, in nesting order; "
        "one slice per region and update with its summed time (args.calls entries)",
        in.hierarchy->source.empty() ? std::string("the nesting") : in.hierarchy->source));
  else
    t.notes.push_back(
        "nesting unknown (give --hierarchy FILE): each region on its own track, one slice per update starting at "
        "the update's start");
  // Background regions not nested in another background region: each on a track of its own.
  std::vector<const HierarchyNode*> background_roots;
  if (in.hierarchy)
    for (const auto& node : in.hierarchy->nodes())
      if (node.role == RegionRole::kBackground && !in.hierarchy->in_background(node.parent) &&
          in.hierarchy->find(node.name) == &node)
        background_roots.push_back(&node);
  if (!background_roots.empty())
    t.notes.push_back(fmt::format(
        "{} background region(s) (role \"background\": on another thread, alongside the update) each on a track "
        "of its own, from the update's start",
        background_roots.size()));
  if (in.hierarchy && !unplaced.empty())
    t.notes.push_back(fmt::format("{} region(s) not in the nesting, each on its own track", unplaced.size()));

  auto drawn = [&](const RankLog& rank) {
    return only_ranks.empty() || (rank.rank && std::any_of(only_ranks.begin(), only_ranks.end(), [&](const RankRange& r) {
                                    return r.contains(*rank.rank);
                                  }));
  };
  for (std::size_t ri = 0; ri < data.ranks.size(); ++ri) {
    const RankLog& rank = data.ranks[ri];
    if (!drawn(rank)) continue;
    TimelineProcess p;
    p.rank = rank.rank;
    p.pid = rank.rank ? *rank.rank : 1000000 + static_cast<std::int64_t>(ri);
    p.name = rank.rank ? fmt::format("rank {}", *rank.rank) : fmt::format("rank unknown ({})", data.files[rank.files.at(0)]);
    const auto& st = starts.us[ri];
    if (!in.hierarchy || clocks.empty()) {
      TimelineTrack track{"updates (wall_ms)", Clock::kHost, std::nullopt, {}};
      for (std::size_t k = 0; k < rank.updates.size(); ++k) {
        const UpdateRecord& u = rank.updates[k];
        track.slices.push_back({{}, st[k], to_us(u.wall_ms), u.step, true, u.wall_ms, {}, {}});
      }
      p.tracks.push_back(std::move(track));
    } else {
      for (Clock c : clocks) {
        TimelineTrack track{clock_label(c), c, std::nullopt, {}};
        NestedLayout layout(in, c, t.shrunk_slices);
        for (std::size_t k = 0; k < rank.updates.size(); ++k) layout.update(rank.updates[k], st[k], track.slices);
        p.tracks.push_back(std::move(track));
        for (const HierarchyNode* node : background_roots) {
          TimelineTrack bg{fmt::format("{} (background) [{}]", node->name, c == Clock::kDevice ? "device" : "host"), c,
                           std::nullopt, {}};
          for (std::size_t k = 0; k < rank.updates.size(); ++k) layout.background(rank.updates[k], *node, st[k], bg.slices);
          if (!bg.slices.empty()) p.tracks.push_back(std::move(bg));
        }
      }
    }
    for (NameTable::Id id : unplaced) {
      for (Clock c : clocks) {
        TimelineTrack track{fmt::format("{} [{}]", data.regions.name(id), c == Clock::kDevice ? "device" : "host"), c,
                            std::string(data.regions.name(id)), {}};
        for (std::size_t k = 0; k < rank.updates.size(); ++k) {
          const UpdateRecord& u = rank.updates[k];
          const RegionSample* s = u.region(id);
          const auto ms = s ? (c == Clock::kDevice ? s->device_ms : s->host_ms) : std::nullopt;
          if (!ms) continue;
          const std::int64_t recorded = to_us(*ms), wall = to_us(u.wall_ms);
          TimelineSlice slice{data.regions.name(id), st[k], std::min(recorded, wall), u.step, false, *ms, s->calls, {}};
          if (recorded > wall) {
            slice.scale = static_cast<double>(wall) / static_cast<double>(recorded);
            ++t.shrunk_slices;
          }
          track.slices.push_back(std::move(slice));
        }
        if (!track.slices.empty()) p.tracks.push_back(std::move(track));
      }
    }
    p.counters = counters(in, rank, st);
    t.processes.push_back(std::move(p));
  }
  if (t.shrunk_slices)
    t.notes.push_back(fmt::format("{} slice(s) shrunk to fit their parent or update (args.scale)", t.shrunk_slices));
  return t;
}

}  // namespace stepprof
