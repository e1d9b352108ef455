#include "stepprof/analysis/code_paths.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "stepprof/schema.hpp"

namespace stepprof {
namespace {

std::optional<double> per(double total, const std::optional<double>& work) {
  if (!work || *work <= 0) return std::nullopt;
  return total / *work;
}

bool ran(const std::optional<RegionValues>& r) {
  return r && (r->calls.value_or(0) > 0 || r->device_ms.value_or(0) > 0 || r->host_ms.value_or(0) > 0);
}

// Whether a path's work comes from micro-batch detail (see PathCost), and whether its
// frames do: every micro-batch of the path with samples lists their frames.
void choose_work_source(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates, PathCost& p) {
  if (!p.region_id || p.samples_id || p.frames_id || p.microbatches_id) return;
  bool named = false, frames = true;
  for (std::size_t k = 0; k < updates.size(); ++k) {
    const UpdateRecord& u = *updates[k];
    bool named_here = false;
    for (const MicroBatch& mb : u.microbatches)
      if (mb.path == p.region_id) {
        named_here = true;
        if (mb.frames.empty()) frames = false;  // (with no samples listed either: unknown, not 0 frames)
      }
    // Ran with no micro-batch that names it (no detail, or micro-batches without a
    // path): its work there is unknown, and 0 would charge its time to too little work.
    if (!named_here && ran(in.region_of(k, u, *p.region_id))) {
      named = false;
      break;
    }
    named = named || named_here;
  }
  p.work_from_microbatches = named;
  p.microbatch_frames = named && frames;
  if (named) return;
  // Else the update's own counters, where the path ran alone in its group (a job that
  // logs `frames` and `samples` per update, not per path, got no costs at all).
  p.samples_id = in.counter(schema::counter::kSamples);
  p.frames_id = in.counter(schema::counter::kFrames);
  if (!p.samples_id && !p.frames_id) return;
  p.work_from_update = true;
  p.samples_counter = p.samples_id ? std::string(schema::counter::kSamples) : std::string();
  p.frames_counter = p.frames_id ? std::string(schema::counter::kFrames) : std::string();
  p.microbatches_counter.clear();
}

// True when a path of `p`'s group other than `p` ran in update `u` (the k-th).
bool another_ran(const AnalysisInput& in, std::size_t k, const UpdateRecord& u, const PathCost& p) {
  return std::any_of(p.others.begin(), p.others.end(), [&](NameTable::Id id) { return ran(in.region_of(k, u, id)); });
}

// Inserts `u` into `kept` (largest excess first, earlier updates first among equals, at
// most PathGroup::kCostliestKept) when its excess is positive and large enough.
void keep_costliest(std::vector<SlowPathUpdate>& kept, const SlowPathUpdate& u) {
  if (!(u.excess_ms > 0)) return;
  if (kept.size() == PathGroup::kCostliestKept && !(u.excess_ms > kept.back().excess_ms)) return;
  const auto at = std::find_if(kept.begin(), kept.end(), [&](const SlowPathUpdate& k) { return u.excess_ms > k.excess_ms; });
  kept.insert(at, u);
  if (kept.size() > PathGroup::kCostliestKept) kept.pop_back();
}

// A path's time in the k-th update: device time where the update has one (for a path
// with device time anywhere), else host time (a rank with device timing off); nullopt
// where the path's region is absent (it did not run).
std::optional<double> path_ms(const AnalysisInput& in, std::size_t k, const UpdateRecord& u, const PathCost& p) {
  if (!p.region_id) return std::nullopt;
  if (p.device)
    if (const auto t = in.region_ms_of(k, u, *p.region_id, true)) return t;
  return in.region_ms_of(k, u, *p.region_id, false);
}

// Whether the log gives path `p` work of kind `what` at all (a counter, or micro-batch detail).
bool has_work_source(const PathCost& p, PathWork what) {
  if (p.work_from_microbatches) return what != PathWork::kFrames || p.microbatch_frames;
  return (what == PathWork::kSamples ? p.samples_id : what == PathWork::kFrames ? p.frames_id : p.microbatches_id)
      .has_value();
}

// Path `p`'s work of kind `what` in the k-th update; nullopt where unknown (its counter
// absent from that update: absent is not 0).
std::optional<double> path_work_of(const AnalysisInput& in, std::size_t k, const UpdateRecord& u, const PathCost& p,
                                   PathWork what) {
  if (p.work_from_microbatches) return path_work(p, what, u);
  const auto& id = what == PathWork::kSamples ? p.samples_id : what == PathWork::kFrames ? p.frames_id : p.microbatches_id;
  if (!id || (p.work_from_update && another_ran(in, k, u, p))) return std::nullopt;
  return in.counter_of(k, u, *id);
}

// A path's time and work in each update, read once (index lookups) and shared by every
// pass below and by the per-update excess: NaN where unknown (see path_ms, path_work_of).
struct PathSeries {
  std::vector<std::uint8_t> ran;  // ran(): the region has calls or a time
  std::vector<double> ms;         // path_ms
  std::array<std::vector<double>, 3> work;  // path_work_of, by PathWork; empty where the log has no such work
};

// Also sums the path's updates that ran it, time and calls into `p`.
PathSeries read_series(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates, PathCost& p) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  PathSeries s;
  const std::size_t n = updates.size();
  s.ran.assign(n, 0);
  s.ms.assign(n, kNaN);
  if (!p.region_id) return s;
  for (std::size_t k = 0; k < n; ++k) {
    const auto r = in.region_of(k, *updates[k], *p.region_id);
    if (!r) continue;
    s.ran[k] = ran(r) ? 1 : 0;
    p.updates += s.ran[k];
    s.ms[k] = path_ms(in, k, *updates[k], p).value_or(kNaN);
    if (!std::isnan(s.ms[k])) p.total_ms += s.ms[k];
    p.calls += static_cast<double>(r->calls.value_or(0));
  }
  for (const PathWork what : {PathWork::kSamples, PathWork::kFrames, PathWork::kMicrobatches}) {
    if (!has_work_source(p, what)) continue;
    auto& w = s.work[static_cast<std::size_t>(what)];
    w.resize(n);
    for (std::size_t k = 0; k < n; ++k) w[k] = path_work_of(in, k, *updates[k], p, what).value_or(kNaN);
  }
  return s;
}

// Frame-count mixing per micro-batch (PathGroup::MicroBatchMixing), over the micro-batches
// that name one of `paths`; nullopt unless some took `slow` and some `fast`, or where one
// of them lists no frames (then a frame count "only with the slow path" may be one that the
// other path's unlisted micro-batches held).
std::optional<PathGroup::MicroBatchMixing> microbatch_mixing(const std::vector<const UpdateRecord*>& updates,
                                                            const std::vector<PathCost>& paths, const PathCost& slow,
                                                            const PathCost& fast) {
  PathGroup::MicroBatchMixing m;
  std::set<std::int64_t> with_slow, with_other;
  for (const UpdateRecord* u : updates)
    for (const MicroBatch& mb : u->microbatches) {
      if (!mb.path) continue;
      const bool is_slow = mb.path == slow.region_id;
      if (!is_slow && !std::any_of(paths.begin(), paths.end(), [&](const PathCost& p) { return mb.path == p.region_id; }))
        continue;
      if (mb.frames.empty()) return std::nullopt;
      const bool mixed = std::any_of(mb.frames.begin(), mb.frames.end(), [&](std::int64_t f) { return f != mb.frames[0]; });
      if (is_slow) {
        ++m.slow;
        m.slow_mixed += mixed ? 1 : 0;
      } else if (mb.path == fast.region_id) {
        ++m.fast;
        m.fast_mixed += mixed ? 1 : 0;
      }
      (is_slow ? with_slow : with_other).insert(mb.frames.begin(), mb.frames.end());
    }
  if (m.slow == 0 || m.fast == 0) return std::nullopt;
  std::set_difference(with_slow.begin(), with_slow.end(), with_other.begin(), with_other.end(),
                      std::back_inserter(m.frame_counts_only_with_slow));
  return m;
}

// The lengths of the micro-batches that took `slow` and `fast` (PathGroup::length_split).
std::optional<PathGroup::LengthSplit> length_split(const std::vector<const UpdateRecord*>& updates,
                                                   const PathCost& slow, const PathCost& fast) {
  PathGroup::LengthSplit l;
  for (const UpdateRecord* u : updates)
    for (const MicroBatch& mb : u->microbatches) {
      if (!mb.path || (mb.path != slow.region_id && mb.path != fast.region_id)) continue;
      std::optional<std::int64_t> length = mb.padded_length;
      if (!length && !mb.tokens.empty()) length = *std::max_element(mb.tokens.begin(), mb.tokens.end());
      if (!length) continue;
      const bool is_slow = mb.path == slow.region_id;
      std::size_t& n = is_slow ? l.slow : l.fast;
      std::int64_t& lo = is_slow ? l.slow_min : l.fast_min;
      std::int64_t& hi = is_slow ? l.slow_max : l.fast_max;
      lo = n == 0 ? *length : std::min(lo, *length);
      hi = n == 0 ? *length : std::max(hi, *length);
      ++n;
    }
  if (l.slow == 0 || l.fast == 0) return std::nullopt;
  l.apart = l.slow_min > l.fast_max || l.slow_max < l.fast_min;
  return l;
}

}  // namespace

std::pair<std::int64_t, const char*> length_limit(const PathGroup::LengthSplit& l) {
  const bool longer = l.slow_min > l.fast_max;
  return {longer ? l.slow_min : l.slow_max, longer ? "more" : "fewer"};
}

std::string length_split_text(const PathGroup& g, bool counts) {
  if (!g.length_split || !g.length_split->apart) return {};
  const auto& l = *g.length_split;
  const bool longer = l.slow_min > l.fast_max;
  auto n = [&](std::size_t k, bool first) {
    return counts ? fmt::format(", {}{}", k, first ? " micro-batches" : "") : std::string();
  };
  return fmt::format("every micro-batch of {} tokens or {} took {} ({}..{}{}), every one of {} or {} took {} ({}..{}{})",
                     length_limit(l).first, length_limit(l).second, g.slow, l.slow_min, l.slow_max, n(l.slow, true),
                     longer ? l.fast_max : l.fast_min, longer ? "fewer" : "more", g.fast, l.fast_min, l.fast_max,
                     n(l.fast, false));
}

std::string slow_updates_text(const std::vector<SlowPathUpdate>& updates, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < updates.size() && i < n; ++i) {
    const SlowPathUpdate& u = updates[i];
    s += fmt::format("{}{}step {} (+{:.1f} ms)", i ? ", " : "", u.rank ? fmt::format("rank {} ", *u.rank) : "",
                     u.step, u.excess_ms);
  }
  return s;
}

std::optional<double> path_work(const PathCost& p, PathWork what, const UpdateRecord& u) {
  if (!p.work_from_microbatches) {
    const auto& id = what == PathWork::kSamples ? p.samples_id : what == PathWork::kFrames ? p.frames_id : p.microbatches_id;
    if (!id) return std::nullopt;
    if (p.work_from_update && std::any_of(p.others.begin(), p.others.end(), [&](NameTable::Id o) {
          return ran(UpdateIndex::values_of(u.region(o)));
        }))
      return std::nullopt;
    return u.counter(*id);
  }
  if (what == PathWork::kFrames && !p.microbatch_frames) return std::nullopt;
  double work = 0;
  for (const MicroBatch& mb : u.microbatches) {
    if (mb.path != p.region_id) continue;
    if (what == PathWork::kMicrobatches) work += 1;
    else if (what == PathWork::kSamples && mb.samples() == 0) return std::nullopt;  // (lists neither: unknown)
    else if (what == PathWork::kSamples) work += static_cast<double>(mb.samples());
    else
      for (const std::int64_t f : mb.frames) work += static_cast<double>(f);
  }
  return work;
}

CodePathResult analyze_code_paths(const AnalysisInput& in) {
  CodePathResult out;
  out.nesting_known = in.hierarchy != nullptr;
  if (!in.hierarchy) return out;
  const auto updates = in.updates();

  for (const auto& [group_name, nodes] : in.hierarchy->alternatives()) {
    PathGroup g;
    g.group = group_name;
    g.updates = updates.size();
    g.parent = in.parent_in_log(nodes.front()->name);  // (a --hierarchy wrapper the log never has is no parent)
    std::vector<PathSeries> series;  // by path
    std::vector<NameTable::Id> ids;   // the group's paths' regions in the dataset
    for (const auto* node : nodes)
      if (const auto id = in.region(node->name)) ids.push_back(*id);
    for (const auto* node : nodes) {
      PathCost p;
      p.region = node->name;
      p.samples_counter = node->samples();
      p.frames_counter = node->frames();
      p.microbatches_counter = node->microbatches();
      p.samples_id = in.counter(p.samples_counter);
      p.frames_id = in.counter(p.frames_counter);
      p.microbatches_id = in.counter(p.microbatches_counter);
      const auto id = in.region(node->name);
      p.region_id = id;
      if (id) p.device = in.has_device_time(*id);
      for (const NameTable::Id other : ids)
        if (other != id) p.others.push_back(other);
      choose_work_source(in, updates, p);
      if (p.work_from_microbatches) {
        // (The counter names stay empty: the work is not a counter's.)
        p.samples_counter.clear();
        p.frames_counter.clear();
        p.microbatches_counter.clear();
      }
      series.push_back(read_series(in, updates, p));
      g.paths.push_back(std::move(p));
    }

    // Each path's work and cost per unit, over the updates in which it ran and its work is
    // known: an update without the path's counter has unknown work, not 0 (its whole time
    // was charged to the others' work), and work logged where the path's region is absent
    // has no time to go with it. With several ranks each rank's work is weighted by its
    // speed (below). `weight` gives the k-th update's weight.
    auto cost_of = [&](std::size_t i, PathWork what, const auto& weight) -> std::optional<double> {
      PathCost& p = g.paths[i];
      if (!has_work_source(p, what)) return std::nullopt;
      const auto& t = series[i].ms;
      const auto& w = series[i].work[static_cast<std::size_t>(what)];
      double ms = 0, work = 0, weighted = 0;
      for (std::size_t k = 0; k < updates.size(); ++k) {
        if (std::isnan(t[k]) || std::isnan(w[k])) continue;
        ms += t[k];
        work += w[k];
        weighted += weight(k) * w[k];
      }
      (what == PathWork::kSamples ? p.samples : what == PathWork::kFrames ? p.frames : p.microbatches) = work;
      return per(ms, weighted);
    };
    auto unweighted = [](std::size_t) { return 1.0; };
    for (std::size_t i = 0; i < g.paths.size(); ++i) {
      g.paths[i].ms_per_sample = cost_of(i, PathWork::kSamples, unweighted);
      g.paths[i].ms_per_frame = cost_of(i, PathWork::kFrames, unweighted);
      g.paths[i].ms_per_microbatch = cost_of(i, PathWork::kMicrobatches, unweighted);
    }

    // Fast and slow path by unit cost: per frame when every path that ran has frames.
    const bool by_frame = std::all_of(g.paths.begin(), g.paths.end(), [](const PathCost& p) {
      return p.updates == 0 || p.ms_per_frame.has_value();
    });
    g.unit = by_frame ? "frame" : "sample";
    auto unit_cost = [&](const PathCost& p) { return by_frame ? p.ms_per_frame : p.ms_per_sample; };
    // With several ranks, a rank that is slower at everything (a straggler) and ran one
    // path only made that path look costly: pooled over ranks, a 3x straggler on the
    // batched path hid a fallback on another rank, and at 5x the batched path was "the
    // slow one". Each rank's work is weighted by its speed on the path most updates ran
    // (its cost per unit there over the pooled cost; 1 where it did not run it), and each
    // path's cost per unit is its time over that weighted work.
    // Where a rank's cost there over its nearby updates (the median of its 5 updates
    // around with time on the path, at least 3) differs from its whole-run cost by more than 10 %,
    // the nearby one is its speed: a rank slow in a stretch of steps only (a straggler
    // window) had its fallback there priced at its whole-run speed, 15 to 60 % too high
    // (an audit).
    std::vector<double> speed(updates.size(), 1.0);
    const PathWork unit_work = by_frame ? PathWork::kFrames : PathWork::kSamples;
    if (in.data.ranks.size() > 1) {
      const PathCost* ref = nullptr;
      for (const auto& p : g.paths)
        if (p.region_id && unit_cost(p) && *unit_cost(p) > 0 && (!ref || p.updates > ref->updates)) ref = &p;
      if (ref) {
        const double pooled = *unit_cost(*ref);
        std::map<std::optional<std::int64_t>, std::pair<double, double>> per_rank;  // rank -> (ms, work)
        std::map<std::optional<std::int64_t>, std::vector<std::size_t>> of_rank;    // rank -> its updates
        const PathSeries& r = series[static_cast<std::size_t>(ref - g.paths.data())];
        const auto& w = r.work[static_cast<std::size_t>(unit_work)];
        auto known = [&](std::size_t k) { return !std::isnan(r.ms[k]) && !std::isnan(w[k]); };
        for (std::size_t k = 0; k < updates.size(); ++k) {
          of_rank[updates[k]->rank].push_back(k);
          if (!known(k)) continue;
          auto& [ms, work] = per_rank[updates[k]->rank];
          ms += r.ms[k];
          work += w[k];
        }
        constexpr std::size_t kNear = 2;     // updates on each side
        constexpr double kApart = 0.10;      // local against whole-run cost
        std::vector<double> near;
        for (auto& [rank, ks] : of_rank) {
          const auto it = per_rank.find(rank);
          if (it == per_rank.end() || it->second.first <= 0 || it->second.second <= 0) continue;
          const double whole = it->second.first / it->second.second;
          std::sort(ks.begin(), ks.end(), [&](std::size_t a, std::size_t b) { return updates[a]->step < updates[b]->step; });
          for (std::size_t p = 0; p < ks.size(); ++p) {
            near.clear();
            for (std::size_t q = p >= kNear ? p - kNear : 0; q < std::min(ks.size(), p + kNear + 1); ++q)
              if (known(ks[q]) && w[ks[q]] > 0 && r.ms[ks[q]] > 0) near.push_back(r.ms[ks[q]] / w[ks[q]]);
            double cost = whole;
            if (near.size() >= 3) {  // (0 ms on the path is left out: a speed of 0 took the update's work away)
              std::nth_element(near.begin(), near.begin() + static_cast<std::ptrdiff_t>(near.size() / 2), near.end());
              const double local = near[near.size() / 2];
              if (local > 0 && std::fabs(local / whole - 1) > kApart) cost = local;
            }
            speed[ks[p]] = cost / pooled;
          }
        }
      }
      auto weight = [&](std::size_t k) { return speed[k]; };
      for (std::size_t i = 0; i < g.paths.size(); ++i) {
        g.paths[i].ms_per_sample = cost_of(i, PathWork::kSamples, weight);
        g.paths[i].ms_per_frame = cost_of(i, PathWork::kFrames, weight);
        g.paths[i].ms_per_microbatch = cost_of(i, PathWork::kMicrobatches, weight);
      }
    }
    const PathCost* fast = nullptr;
    const PathCost* slow = nullptr;
    for (const auto& p : g.paths) {
      const auto c = unit_cost(p);
      if (!c || p.updates == 0) continue;
      if (!fast || *c < *unit_cost(*fast)) fast = &p;
      if (!slow || *c > *unit_cost(*slow)) slow = &p;
    }
    constexpr double kSignificant = 1.10;  // below this ratio neither path is "the slow one"
    if (fast && slow && fast != slow && *unit_cost(*slow) < kSignificant * *unit_cost(*fast)) {
      g.similar_cost = true;
      g.slow_over_fast = *unit_cost(*slow) / *unit_cost(*fast);
    } else if (fast && slow && fast != slow) {
      g.fast = fast->region;
      g.slow = slow->region;
      g.slow_over_fast = *unit_cost(*slow) / *unit_cost(*fast);
      const PathSeries& slow_series = series[static_cast<std::size_t>(slow - g.paths.data())];
      const bool slow_work = has_work_source(*slow, unit_work);
      // (With three or more paths, "fast only" is the fast path's: an update that ran only
      // a middle one is neither.)
      const PathSeries& fast_series = series[static_cast<std::size_t>(fast - g.paths.data())];

      // Frame counts are small numbers: a table for them, a map for any others.
      constexpr std::int64_t kTable = 1024;
      std::vector<FrameCountEvidence> table(kTable);
      std::map<std::int64_t, FrameCountEvidence> evidence;
      double saving = 0;
      std::map<std::int64_t, double> step_excess;  // per step: the largest excess of any rank
      for (std::size_t k = 0; k < updates.size(); ++k) {
        const UpdateRecord* u = updates[k];
        const bool slow_ran = slow_series.ran[k] != 0;
        const bool fast_ran = fast_series.ran[k] != 0;
        if (slow_ran) ++g.updates_with_slow;
        else if (fast_ran) ++g.updates_fast_only;
        std::size_t distinct = 0;
        for (const auto& [frames, samples] : u->frame_histogram) {
          if (samples <= 0) continue;
          ++distinct;
          auto& e =
              frames >= 0 && frames < kTable ? table[static_cast<std::size_t>(frames)] : evidence[frames];
          e.frames = frames;
          ++e.updates_with;
          if (slow_ran) ++e.updates_with_slow;
          e.samples += samples;
        }
        if (distinct > 1) {
          if (slow_ran) ++g.slow_updates_mixed_frames;
          else if (fast_ran) ++g.fast_only_updates_mixed_frames;
        }
        // (Where the slow path's work is unknown, its excess is too: left out, not its whole time.)
        const double t = slow_ran && slow_work ? slow_series.ms[k] : std::numeric_limits<double>::quiet_NaN();
        double work = std::isnan(t) ? t : slow_series.work[static_cast<std::size_t>(unit_work)][k];
        // With the work taken from the update's own counters, an update that also ran
        // another path has the slow path's share unknown: its time over its own unit cost
        // stands for it (as path_excess_ms prices it), else only the updates where it ran
        // alone were priced (a quarter of the saving, on a C++ engine's log).
        if (std::isnan(work) && !std::isnan(t) && slow->work_from_update && unit_cost(*slow) && *unit_cost(*slow) > 0)
          work = t / (*unit_cost(*slow) * speed[k]);
        if (!std::isnan(work)) {
          const double excess = t - work * *unit_cost(*fast) * speed[k];
          saving += excess;
          auto [at, added] = step_excess.try_emplace(u->step, excess);
          if (!added) at->second = std::max(at->second, excess);
          keep_costliest(g.costliest, {u->rank, u->step, t, excess});
        }
      }
      g.microbatch_mixing = microbatch_mixing(updates, g.paths, *slow, *fast);
      g.length_split = length_split(updates, *slow, *fast);
      g.frames_logged = std::any_of(updates.begin(), updates.end(), [](const UpdateRecord* u) {
        return !u->frame_histogram.empty() ||
               std::any_of(u->microbatches.begin(), u->microbatches.end(), [](const MicroBatch& mb) { return !mb.frames.empty(); });
      });
      for (std::int64_t f = 0; f < kTable; ++f)
        if (table[static_cast<std::size_t>(f)].updates_with > 0) evidence[f] = table[static_cast<std::size_t>(f)];
      for (auto& [frames, e] : evidence) {
        g.frame_counts.push_back(e);
        if (e.updates_with > 0 && e.updates_with == e.updates_with_slow) g.frame_counts_only_with_slow.push_back(frames);
      }
      if (slow_work && !updates.empty()) {
        g.saving_ms_per_update = saving / static_cast<double>(updates.size());
        std::set<std::int64_t> steps;
        for (const UpdateRecord* u : updates) steps.insert(u->step);
        double sum = 0;
        for (const auto& [step, excess] : step_excess) sum += std::max(0.0, excess);  // (a cheaper slow path saves nothing)
        g.step_saving_at_most_ms = sum / static_cast<double>(steps.size());
      }
    }
    // Each update's time on paths costlier per unit than the fast one, beyond that cost
    // (see path_excess_ms).
    if (!g.fast.empty() && unit_cost(*fast) && *unit_cost(*fast) > 0) {
      if (out.update_excess_ms.empty()) out.update_excess_ms.assign(updates.size(), 0.0);
      for (std::size_t i = 0; i < g.paths.size(); ++i) {
        const auto c = unit_cost(g.paths[i]);
        if (!c || !(*c > *unit_cost(*fast))) continue;
        const double beyond = 1 - *unit_cost(*fast) / *c;
        const auto& t = series[i].ms;
        for (std::size_t k = 0; k < updates.size(); ++k)
          if (!std::isnan(t[k])) out.update_excess_ms[k] += t[k] * beyond;
      }
    }
    out.groups.push_back(std::move(g));
  }
  return out;
}

double path_excess_ms(const CodePathResult& paths, std::size_t k) {
  return k < paths.update_excess_ms.size() ? paths.update_excess_ms[k] : 0.0;
}

}  // namespace stepprof
