#include "stepprof/analysis/code_paths.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace stepprof {
namespace {

std::optional<double> sum_counter(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                                  std::optional<NameTable::Id> id) {
  if (!id) return std::nullopt;
  double s = 0;
  for (std::size_t k = 0; k < updates.size(); ++k) s += in.counter_or_zero(k, *updates[k], id);
  return s;
}

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
        if (mb.frames.empty() && mb.samples() > 0) frames = false;
      }
    // Ran with no micro-batch that names it (no detail, or micro-batches without a
    // path): its work there is unknown, and 0 would charge its time to too little work.
    if (!named_here && ran(in.region_of(k, u, *p.region_id))) return;
    named = named || named_here;
  }
  p.work_from_microbatches = named;
  p.microbatch_frames = named && frames;
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

}  // namespace

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
    return u.counter(*id);
  }
  if (what == PathWork::kFrames && !p.microbatch_frames) return std::nullopt;
  double work = 0;
  for (const MicroBatch& mb : u.microbatches) {
    if (mb.path != p.region_id) continue;
    if (what == PathWork::kMicrobatches) work += 1;
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
    g.parent = nodes.front()->parent;
    std::vector<std::optional<NameTable::Id>> ids;
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
      ids.push_back(id);
      if (id) {
        p.device = in.has_device_time(*id);
        for (std::size_t k = 0; k < updates.size(); ++k) {
          const auto r = in.region_of(k, *updates[k], *id);
          if (!r) continue;
          if (ran(r)) ++p.updates;
          p.total_ms += (p.device ? r->device_ms : r->host_ms).value_or(0);
          p.calls += static_cast<double>(r->calls.value_or(0));
        }
      }
      choose_work_source(in, updates, p);
      if (p.work_from_microbatches) {
        // (The counter names stay empty: the work is not a counter's.)
        auto sum = [&](PathWork what) -> std::optional<double> {
          double s = 0;
          for (const UpdateRecord* u : updates)
            if (const auto w = path_work(p, what, *u)) s += *w;
            else return std::nullopt;
          return s;
        };
        p.samples = sum(PathWork::kSamples);
        p.frames = sum(PathWork::kFrames);
        p.microbatches = sum(PathWork::kMicrobatches);
        p.samples_counter.clear();
        p.frames_counter.clear();
        p.microbatches_counter.clear();
      } else {
        p.samples = sum_counter(in, updates, p.samples_id);
        p.frames = sum_counter(in, updates, p.frames_id);
        p.microbatches = sum_counter(in, updates, p.microbatches_id);
      }
      p.ms_per_sample = per(p.total_ms, p.samples);
      p.ms_per_frame = per(p.total_ms, p.frames);
      p.ms_per_microbatch = per(p.total_ms, p.microbatches);
      g.paths.push_back(std::move(p));
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
    std::map<std::optional<std::int64_t>, double> speed;
    auto speed_of = [&](const UpdateRecord& u) {
      const auto it = speed.find(u.rank);
      return it == speed.end() ? 1.0 : it->second;
    };
    auto work_of = [&](const PathCost& p, PathWork what, std::size_t k) -> double {
      if (p.work_from_microbatches) return path_work(p, what, *updates[k]).value_or(0);
      const auto& id = what == PathWork::kSamples ? p.samples_id : what == PathWork::kFrames ? p.frames_id : p.microbatches_id;
      return in.counter_or_zero(k, *updates[k], id);
    };
    const PathWork unit_work = by_frame ? PathWork::kFrames : PathWork::kSamples;
    if (in.data.ranks.size() > 1) {
      const PathCost* ref = nullptr;
      for (const auto& p : g.paths)
        if (p.region_id && unit_cost(p) && *unit_cost(p) > 0 && (!ref || p.updates > ref->updates)) ref = &p;
      if (ref) {
        std::map<std::optional<std::int64_t>, std::pair<double, double>> per_rank;  // rank -> (ms, work)
        for (std::size_t k = 0; k < updates.size(); ++k) {
          const auto t = in.region_ms_of(k, *updates[k], *ref->region_id, ref->device);
          if (!t) continue;
          auto& [ms, work] = per_rank[updates[k]->rank];
          ms += *t;
          work += work_of(*ref, unit_work, k);
        }
        for (const auto& [rank, tw] : per_rank)
          if (tw.first > 0 && tw.second > 0) speed[rank] = tw.first / tw.second / *unit_cost(*ref);
      }
      for (auto& p : g.paths) {
        auto weighted = [&](PathWork what, const std::optional<double>& pooled) -> std::optional<double> {
          if (!pooled) return std::nullopt;
          double w = 0;
          for (std::size_t k = 0; k < updates.size(); ++k) w += speed_of(*updates[k]) * work_of(p, what, k);
          return per(p.total_ms, w);
        };
        p.ms_per_sample = weighted(PathWork::kSamples, p.ms_per_sample);
        p.ms_per_frame = weighted(PathWork::kFrames, p.ms_per_frame);
        p.ms_per_microbatch = weighted(PathWork::kMicrobatches, p.ms_per_microbatch);
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
      const auto slow_id = ids[static_cast<std::size_t>(slow - g.paths.data())];
      const PathWork slow_unit = by_frame ? PathWork::kFrames : PathWork::kSamples;
      const auto slow_counter = by_frame ? slow->frames_id : slow->samples_id;
      const bool slow_work = slow->work_from_microbatches || slow_counter;
      std::vector<std::optional<NameTable::Id>> fast_ids;
      for (std::size_t i = 0; i < g.paths.size(); ++i)
        if (&g.paths[i] != slow) fast_ids.push_back(ids[i]);

      // Frame counts are small numbers: a table for them, a map for any others.
      constexpr std::int64_t kTable = 1024;
      std::vector<FrameCountEvidence> table(kTable);
      std::map<std::int64_t, FrameCountEvidence> evidence;
      double saving = 0;
      std::map<std::int64_t, double> step_excess;  // per step: the largest excess of any rank
      for (std::size_t k = 0; k < updates.size(); ++k) {
        const UpdateRecord* u = updates[k];
        const bool slow_ran = slow_id && ran(in.region_of(k, *u, *slow_id));
        const bool fast_ran = std::any_of(fast_ids.begin(), fast_ids.end(),
                                          [&](const auto& id) { return id && ran(in.region_of(k, *u, *id)); });
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
        if (slow_ran && slow_work) {
          const auto t = in.region_ms_of(k, *u, *slow_id, slow->device);
          const double work = slow->work_from_microbatches ? path_work(*slow, slow_unit, *u).value_or(0)
                                                           : in.counter_or_zero(k, *u, slow_counter);
          const double excess = t.value_or(0) - work * *unit_cost(*fast) * speed_of(*u);
          saving += excess;
          auto [at, added] = step_excess.try_emplace(u->step, excess);
          if (!added) at->second = std::max(at->second, excess);
          keep_costliest(g.costliest, {u->rank, u->step, t.value_or(0), excess});
        }
      }
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
    out.groups.push_back(std::move(g));
  }
  return out;
}

}  // namespace stepprof
