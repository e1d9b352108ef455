#include "dataset_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stepprof/hierarchy.hpp"
#include "stepprof/schema.hpp"
#include "../util/parallel.hpp"

namespace stepprof::detail {
namespace {

struct FirstSeen {
  std::int64_t step = std::numeric_limits<std::int64_t>::min();  // min: not seen
  bool in_another_step = false;
  SourceLocation where;
};

// The earliest step of any rank whose record says its recorder counted `kind` (e.g.
// too_many_regions); nullopt when none does.
std::optional<std::int64_t> first_step_with_error(const Dataset& data, std::string_view kind) {
  std::optional<std::int64_t> first;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates)
      for (const auto& [k, n] : u.recorder_errors)
        if (k == kind && n > 0 && (!first || u.step < *first)) first = u.step;
  return first;
}

// `full_kind`: the recorder's error kind for a name refused past its name limit.
template <typename EachId>
void check(const Dataset& data, const NameTable& names, std::string_view what, std::string_view advice,
           std::string_view full_kind, EachId&& each_id, Diagnostics& diag) {
  if (names.size() < kMinOneOffNames) return;  // (too few names in all to warn of: no need to look)
  std::vector<FirstSeen> seen(names.size());
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates)
      each_id(u, [&](NameTable::Id id) {
        FirstSeen& s = seen[id];
        if (s.step == std::numeric_limits<std::int64_t>::min()) s = {u.step, false, u.source};
        else if (s.step != u.step) s.in_another_step = true;
      });
  std::vector<NameTable::Id> one_off;
  std::size_t used = 0;
  for (NameTable::Id id = 0; id < seen.size(); ++id) {
    if (seen[id].step == std::numeric_limits<std::int64_t>::min()) continue;
    ++used;
    if (!seen[id].in_another_step) one_off.push_back(id);
  }
  if (one_off.size() < kMinOneOffNames || one_off.size() * 4 <= used) return;
  // In as many different steps: a log of one update has every name in one step.
  std::vector<std::int64_t> steps;
  for (const NameTable::Id id : one_off) steps.push_back(seen[id].step);
  std::sort(steps.begin(), steps.end());
  if (static_cast<std::size_t>(std::unique(steps.begin(), steps.end()) - steps.begin()) < kMinOneOffNames) return;
  std::string examples;
  for (std::size_t i = 0; i < 3; ++i)
    examples += fmt::format("{}\"{}\" (step {})", i ? ", " : "", names.name(one_off[i]), seen[one_off[i]].step);
  const SourceLocation& at = seen[one_off[0]].where;
  // Where the recorder ran out of names, these are why: a region first used after that
  // (a phase that starts late in the run) was never recorded, and the warnings said only
  // "too_many_regions".
  // (Only where these names came near the recorder's limit: 1024 names, stepprof.hpp.)
  constexpr std::size_t kRecorderNames = 1024;
  std::string full;
  if (const auto step = 2 * one_off.size() >= kRecorderNames ? first_step_with_error(data, full_kind) : std::nullopt)
    full = fmt::format("; they filled the recorder's name table ({} from step {} on): a {} first used after that "
                       "is not recorded at all",
                       full_kind, *step, what);
  diag.report({Severity::kWarning, Problem::kOneOffNames, data.files[at.file], at.line, 0,
               fmt::format("{} of the {} {} names occur in one step each, e.g. {}: names made with the step "
                           "number in them? Each is its own {}, so every table and chart lists them one by one "
                           "and the analyses grow with their number{}; {}",
                           one_off.size(), used, what, examples, what, full, advice)});
}

}  // namespace

void check_one_off_names(const Dataset& data, Diagnostics& diag) {
  check(data, data.regions, "region", "give the region one name and record what varies as a counter",
        "too_many_regions", [](const UpdateRecord& u, auto&& f) {
          for (const auto& s : u.regions) f(s.region);
        },
        diag);
  check(data, data.counters, "counter", "give the counter one name (its value is per update already)",
        "too_many_counters", [](const UpdateRecord& u, auto&& f) {
          for (const auto& c : u.counters) f(c.name);
        },
        diag);
}

void check_zero_wall_time(const Dataset& data, Diagnostics& diag) {
  std::uint64_t zero = 0, all = 0, untimed = 0;
  const UpdateRecord* first = nullptr;
  const UpdateRecord* first_untimed = nullptr;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates) {
      ++all;
      if (u.wall_ms != 0) continue;
      const bool timed = std::any_of(u.regions.begin(), u.regions.end(), [](const RegionSample& s) {
        return (s.host_ms && *s.host_ms > 0) || (s.device_ms && *s.device_ms > 0);
      });
      if (!timed) {
        if (!first_untimed) first_untimed = &u;
        ++untimed;
        continue;
      }
      if (!first) first = &u;
      ++zero;
    }
  // Nothing timed at all (a loop whose clock was never started; a trace's ProfilerStep of
  // 0 us is an error of the trace reader's, not an update): every figure would be a quiet 0.
  if (untimed == all && first_untimed)
    diag.report({Severity::kWarning, Problem::kZeroWallTime, data.files[first_untimed->source.file],
                 first_untimed->source.line, 0,
                 fmt::format("every update ({}) has wall_ms 0 and no region with time: nothing was timed, so every "
                             "figure of the report is 0 (e.g. a loop whose clock was never started)",
                             all)});
  if (!first) return;
  diag.report({Severity::kWarning, Problem::kZeroWallTime, data.files[first->source.file], first->source.line, 0,
               fmt::format("wall_ms is 0 in {} of {} update(s), first step {}, though their regions took time: the "
                           "update's time is unknown there, so shares of it, time outside every region and "
                           "throughput are not meaningful (was the update's clock started?)",
                           zero, all, first->step)});
}

void check_region_times(const Dataset& data, Diagnostics& diag) {
  // Per rank, on both cores for a large dataset (it reads every region sample: 40 ms for
  // 64 x 10,000 updates on one), then the ranks' counts added and the worst kept.
  struct Found {
    std::uint64_t over = 0, updates_over = 0;
    const UpdateRecord* worst = nullptr;
    const RegionSample* worst_sample = nullptr;
    bool worst_device = false;
    double worst_ratio = 0;
  };
  std::vector<Found> per_rank(data.ranks.size());
  std::size_t updates = 0;
  for (const auto& rank : data.ranks) updates += rank.updates.size();
  constexpr std::size_t kThreadFrom = 50'000;  // updates
  parallel_for(data.ranks.size(), updates >= kThreadFrom ? 0 : 1, [&](std::size_t ri) {
    Found& f = per_rank[ri];
    // A profiler trace's times were converted by stepprof (no unit to get wrong), and a
    // GPU activity counts in the step that launched it: a step in which the CPU only
    // queued work (a CUDA graph's replay, a CPU running ahead) has a tiny wall_ms and a
    // long device time, legitimately.
    if (const auto& config = data.ranks[ri].config; config && config->find("trace_format")) return;
    for (const auto& u : data.ranks[ri].updates) {
      if (!(u.wall_ms > 0)) continue;
      const double limit = kRegionBeyondUpdateFactor * u.wall_ms;
      // (The largest time first, without branches: nearly every update has none beyond.)
      double top = 0;
      for (const auto& s : u.regions) top = std::max({top, s.device_ms.value_or(0.0), s.host_ms.value_or(0.0)});
      if (!(top > limit)) continue;
      ++f.updates_over;
      for (const auto& s : u.regions)
        for (const bool device : {true, false}) {
          const auto ms = device ? s.device_ms : s.host_ms;
          if (!ms || !(*ms > limit)) continue;
          ++f.over;
          if (const double ratio = *ms / u.wall_ms; ratio > f.worst_ratio) {
            f.worst_ratio = ratio;
            f.worst = &u;
            f.worst_sample = &s;
            f.worst_device = device;
          }
        }
    }
  });
  std::uint64_t over = 0, updates_over = 0;
  const UpdateRecord* worst = nullptr;
  const RegionSample* worst_sample = nullptr;
  bool worst_device = false;
  double worst_ratio = 0;
  for (const Found& f : per_rank) {  // (in rank order: the first of equal ratios is kept, as in one pass)
    over += f.over;
    updates_over += f.updates_over;
    if (f.worst && f.worst_ratio > worst_ratio) {
      worst_ratio = f.worst_ratio;
      worst = f.worst;
      worst_sample = f.worst_sample;
      worst_device = f.worst_device;
    }
  }
  if (!worst) return;
  const double ms = *(worst_device ? worst_sample->device_ms : worst_sample->host_ms);
  // A host time summed over calls on many threads at once (the same name on every worker
  // of a pool) is as far over as a wrong unit: the calls say which to suspect first.
  const auto calls = worst_sample->calls.value_or(0);
  const std::string why =
      !worst_device && calls > 1
          ? fmt::format("its {} calls' times are summed: the same region entered on several threads at once? "
                        "Give such threads' regions their own names, or the role \"background\" (docs/recorder.md); "
                        "else a value in another unit, such as ns written as ms, or a corrupt one",
                        calls)
          : std::string("a value in another unit, such as ns written as ms, or a corrupt one?");
  diag.report({Severity::kWarning, Problem::kRegionBeyondUpdate, data.files[worst->source.file], worst->source.line, 0,
               fmt::format("{} region time(s) in {} update(s) are over {:g}x their update's wall_ms; the largest: "
                           "{}'s {} time {:.6g} ms in step {}{} is {} the update's {:.6g} ms ({}); the figures use "
                           "them as written, so that region's share of the update, mean and max are dominated by them",
                           over, updates_over, kRegionBeyondUpdateFactor, data.regions.name(worst_sample->region),
                           worst_device ? "device" : "host", ms, worst->step,
                           worst->rank ? fmt::format(" of rank {}", *worst->rank) : std::string(),
                           // (a wall_ms of 1e-320 ms made the ratio infinite: "infx")
                           std::isfinite(worst_ratio) ? fmt::format("{:.3g}x", worst_ratio) : std::string("far over"),
                           worst->wall_ms, why)});
}

void check_token_counters(const Dataset& data, Diagnostics& diag) {
  // (A log without token_slots at all, e.g. packed sequences, has no padding to check.)
  const auto valid_id = data.counters.find(schema::counter::kValidTokens);
  const auto slots_id = data.counters.find(schema::counter::kTokenSlots);
  if (!valid_id || !slots_id) return;
  std::uint64_t bad = 0, with_either = 0, disagree = 0, with_field = 0;
  const UpdateRecord* first = nullptr;
  const UpdateRecord* first_disagreeing = nullptr;
  double first_from_counters = 0;
  std::string first_what;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates) {
      const auto valid = u.counter(*valid_id), slots = u.counter(*slots_id);
      if (!valid && !slots) continue;
      ++with_either;
      if (!schema::counter::token_counters_contradict(slots, valid)) {
        // The update's padding_fraction field against its counters (the analyses use the
        // counters): a field set by hand from other numbers.
        if (u.padding_fraction && *slots > 0) {
          ++with_field;
          const double from_counters = 1.0 - *valid / *slots;
          if (std::fabs(*u.padding_fraction - from_counters) > kPaddingFieldTolerance) {
            if (!first_disagreeing) {
              first_disagreeing = &u;
              first_from_counters = from_counters;
            }
            ++disagree;
          }
        }
        continue;
      }
      if (!first) {
        first = &u;
        first_what = !slots   ? fmt::format("counts.valid_tokens {} without counts.token_slots", *valid)
                     : !valid ? fmt::format("counts.token_slots {} without counts.valid_tokens", *slots)
                              : fmt::format("counts.valid_tokens {} is above counts.token_slots {}", *valid, *slots);
      }
      ++bad;
    }
  if (first_disagreeing)
    diag.report({Severity::kWarning, Problem::kBadField, data.files[first_disagreeing->source.file],
                 first_disagreeing->source.line, 0,
                 fmt::format("padding_fraction {:.4g} (step {}; {} of {} update(s) with the field and token counters) "
                             "is not 1 - valid_tokens / token_slots = {:.4g}: the padding figures use the counters "
                             "(was the field computed another way, e.g. a mean over micro-batches?)",
                             *first_disagreeing->padding_fraction, first_disagreeing->step, disagree, with_field,
                             first_from_counters)});
  if (!first) return;
  diag.report({Severity::kError, Problem::kBadField, data.files[first->source.file], first->source.line, 0,
               fmt::format("{} (step {}; {} of {} update(s) with token counters have one of the two without the other, "
                           "or more valid tokens than slots): a micro-batch's padding is its "
                           "token slots less its valid tokens, so it would be negative or 100 %; the padding figures "
                           "and the token throughputs leave these updates out (were the counters swapped, "
                           "token_slots counted before padding, or one of them not recorded?)",
                           first_what, first->step, bad, with_either)});
}

void check_wall_times(const Dataset& data, Diagnostics& diag) {
  std::uint64_t over = 0;
  const UpdateRecord* worst = nullptr;
  double worst_ratio = 0, worst_median = 0;
  std::vector<double> walls;
  for (const auto& rank : data.ranks) {
    walls.clear();
    // (Not the first update after a config record: it counts from the recorder's open(),
    // so it holds compilation and warm-up, 42x the others in a bundled GPU run.)
    for (const auto& u : rank.updates)
      if (u.wall_ms > 0 && !u.source.after_config) walls.push_back(u.wall_ms);
    if (walls.size() < kMinUpdatesForWallCheck) continue;
    const auto mid = walls.begin() + static_cast<std::ptrdiff_t>(walls.size() / 2);
    std::nth_element(walls.begin(), mid, walls.end());  // (the upper median: enough for a 100x test)
    const double median = *mid;
    if (!(median > 0)) continue;
    for (const auto& u : rank.updates) {
      if (u.source.after_config) continue;
      const double ratio = u.wall_ms / median;
      if (!(ratio > kWallBeyondRankFactor)) continue;
      ++over;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst = &u;
        worst_median = median;
      }
    }
  }
  if (!worst) return;
  double longest = 0;
  for (const auto& s : worst->regions) longest = std::max({longest, s.device_ms.value_or(0.0), s.host_ms.value_or(0.0)});
  diag.report({Severity::kWarning, Problem::kWallTimeOutlier, data.files[worst->source.file], worst->source.line, 0,
               fmt::format("{} update(s) have a wall_ms over {:g}x their rank's median; the largest: step {}{}, "
                           "{:.6g} ms, {} the rank's median {:.6g} ms ({}): a clock that "
                           "jumped (a wall clock across an NTP step), a value in another unit or a corrupt one? (A "
                           "stall inside the update, a checkpoint save, does this too.) The figures use it as "
                           "written: it dominates the update time's mean, max and variability (--steps can leave "
                           "it out)",
                           over, kWallBeyondRankFactor, worst->step,
                           worst->rank ? fmt::format(" of rank {}", *worst->rank) : std::string(), worst->wall_ms,
                           std::isfinite(worst_ratio) ? fmt::format("{:.3g}x", worst_ratio) : std::string("far over"),
                           worst_median,
                           worst->regions.empty() ? std::string("it has no region")
                                                  : fmt::format("its longest region: {:.6g} ms", longest))});
}

void check_zero_region_times(const Dataset& data, Diagnostics& diag) {
  std::size_t ranks = 0;
  const RankLog* first = nullptr;
  std::uint64_t first_updates = 0;
  for (const auto& rank : data.ranks) {
    std::uint64_t timed = 0, updates = 0;
    bool nonzero = false, wall = false;
    for (const auto& u : rank.updates) {
      bool any = false;
      for (const auto& s : u.regions)
        for (const auto& t : {s.device_ms, s.host_ms})
          if (t) {
            ++timed;
            any = true;
            nonzero = nonzero || *t != 0;
          }
      if (any) ++updates, wall = wall || u.wall_ms > 0;
      if (nonzero) break;
    }
    if (nonzero || timed == 0 || !wall) continue;
    ++ranks;
    if (!first) first = &rank, first_updates = updates;
  }
  if (!first) return;
  const UpdateRecord& u = first->updates.front();
  diag.report({Severity::kWarning, Problem::kZeroRegionTimes, data.files[u.source.file], u.source.line, 0,
               fmt::format("{}every region time is 0 ms in the {} update(s) of {} with regions, whose wall_ms are "
                           "not: was the recorder's region clock running, or are the times in another unit, "
                           "rounded to 0? Its regions count as taking no time: they lower each region's median "
                           "over the job, and the rank comparison, which reads the communication region, is wrong "
                           "for it",
                           ranks > 1 ? fmt::format("{} ranks have no region time; the first: ", ranks) : "",
                           first_updates, u.rank ? fmt::format("rank {}", *u.rank) : std::string("the rank"))});
}

void check_microbatch_paths(const Dataset& data, Diagnostics& diag) {
  std::uint64_t mbs = 0, updates = 0, in_untimed = 0;  // in_untimed: of mbs, in updates that time no region
  const UpdateRecord* first = nullptr;
  NameTable::Id first_path = 0;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates) {
      bool any = false;
      for (const auto& mb : u.microbatches)
        if (mb.path && !u.region(*mb.path)) {
          ++mbs;
          in_untimed += u.regions.empty() ? 1 : 0;
          any = true;
          if (!first) first = &u, first_path = *mb.path;
        }
      updates += any ? 1 : 0;
    }
  if (!first) return;
  // Why: a misspelt path, or an update that times no region at all (the path is not at
  // fault), or some of each.
  const std::string why = in_untimed == 0     ? "a misspelt path?"
                          : in_untimed == mbs ? "their updates time no region at all."
                                              : fmt::format("{} of them in updates that time no region at all; the "
                                                            "others: a misspelt path?",
                                                            in_untimed);
  diag.report({Severity::kWarning, Problem::kBadField, data.files[first->source.file], first->source.line, 0,
               fmt::format("{} micro-batch(es) in {} update(s) name a path that is no region of their update (first: "
                           "step {}, \"{}\"): {} The code paths and `whatif batched-geometry` take a "
                           "micro-batch's path as the region it ran, and find no time for it",
                           mbs, updates, first->step, printable(data.regions.name(first_path)), why)});
}

void check_gpu_busy(const Dataset& data, Diagnostics& diag) {
  std::uint64_t over = 0, with = 0;
  const UpdateRecord* first = nullptr;
  double first_busy = 0;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates) {
      const auto busy = u.extra_number(schema::kGpuBusyMs);
      if (!busy || !(u.wall_ms > 0)) continue;  // (a wall_ms of 0 is the zero-wall checks')
      ++with;
      // (The import writes both from the same nanoseconds: beyond rounding, another unit.)
      if (*busy > u.wall_ms * (1 + 1e-9) + 1e-6) {
        if (!over++) first = &u, first_busy = *busy;
      }
    }
  if (!first) return;
  diag.report({Severity::kWarning, Problem::kBadField, data.files[first->source.file], first->source.line, 0,
               fmt::format("gpu_busy_ms exceeds wall_ms in {} of {} update(s) with it (first: step {}, {} ms busy in "
                           "a {} ms update): the GPU's busy time is counted within the update, so it cannot be "
                           "longer (another unit? us for ms); those updates are taken as never idle",
                           over, with, first->step, first_busy, first->wall_ms)});
}

// input_shapes are (b, l): the padding analysis reads l, the padded length, from them. A
// shape of another number of dimensions ("(8,)", "(8, 3154, 2)") is kept, but its last
// dimension is no padded length: said once, with a count.
void check_input_shape_dims(const Dataset& data, Diagnostics& diag) {
  std::uint64_t shapes = 0, updates = 0;
  const UpdateRecord* first = nullptr;
  const InputShape* first_shape = nullptr;
  for (const auto& rank : data.ranks)
    for (const auto& u : rank.updates) {
      bool any = false;
      for (const auto& sh : u.input_shapes)
        if (sh.dims.size() != 2) {
          ++shapes;
          any = true;
          if (!first) first = &u, first_shape = &sh;
        }
      updates += any ? 1 : 0;
    }
  if (!first) return;
  diag.report({Severity::kWarning, Problem::kBadField, data.files[first->source.file], first->source.line, 0,
               fmt::format("{} input shape(s) in {} update(s) do not have 2 dimensions (first: step {}, ({})): "
                           "input_shapes are (batch, padded length) of a micro-batch's token tensor; the padding "
                           "analysis reads the padded length from 2-dimensional shapes only",
                           shapes, updates, first->step,
                           // (Python's tuple text: "(8,)" for one dimension)
                           fmt::format("{}{}", fmt::join(first_shape->dims, ", "), first_shape->dims.size() == 1 ? "," : ""))});
}

}  // namespace stepprof::detail

namespace stepprof {

void check_optimizer_every_update(const Hierarchy& h, const Dataset& data, Diagnostics& diag) {
  for (const auto& n : h.nodes()) {
    if (n.role != RegionRole::kOptimizer) continue;
    const auto id = data.regions.find(n.name);
    if (!id) continue;
    std::int64_t every = 0;
    std::size_t with = 0, total = 0;
    const UpdateRecord* first = nullptr;
    bool periodic = true;
    for (const auto& rank : data.ranks) {
      std::vector<std::int64_t> steps, at;
      for (const auto& u : rank.updates) {
        steps.push_back(u.step);
        if (const RegionSample* s = u.region(*id); s && (s->device_ms || s->host_ms || s->calls)) {
          at.push_back(u.step);
          if (!first) first = &u;
        }
      }
      if (at.empty()) continue;  // (a rank without it: a pipeline stage without the optimizer's region)
      std::sort(steps.begin(), steps.end());
      std::sort(at.begin(), at.end());
      // Consecutive steps (not a log of every k-th update), 6 or more; the region in 3 or
      // more, every k-th step through the rank's whole window (in steps 3 and 5 of 100 it
      // was "once every 2 steps": a review).
      periodic = steps.size() >= 6 && at.size() >= 3 &&
                 steps.back() - steps.front() + 1 == static_cast<std::int64_t>(steps.size());
      const std::int64_t k = periodic ? at[1] - at[0] : 0;
      periodic = periodic && k >= 2 && (every == 0 || k == every) && at.front() < steps.front() + k &&
                 at.back() > steps.back() - k;
      for (std::size_t i = 1; periodic && i < at.size(); ++i) periodic = at[i] - at[i - 1] == k;
      if (!periodic) break;
      every = k;
      with += at.size();
      total += steps.size();
    }
    if (!periodic || every == 0 || !first) continue;
    diag.report({Severity::kWarning, Problem::kOptimizerNotEveryUpdate, data.files[first->source.file],
                 first->source.line, 0,
                 fmt::format("the optimizer's region \"{}\" ran in {} of {} updates, once every {} steps on every "
                             "rank that has it: is each update record a micro-batch (prof.step() or end_update() called per "
                             "micro-batch under gradient accumulation)? Then every per-update figure is per "
                             "micro-batch: call it once per optimizer step, after optimizer.step()",
                             n.name, with, total, every)});
  }
}

}  // namespace stepprof

namespace stepprof::detail {

void check_dataset(const Dataset& data, Diagnostics& diag) {
  check_one_off_names(data, diag);
  check_zero_wall_time(data, diag);
  check_region_times(data, diag);
  check_wall_times(data, diag);
  check_zero_region_times(data, diag);
  check_token_counters(data, diag);
  check_microbatch_paths(data, diag);
  check_gpu_busy(data, diag);
  check_input_shape_dims(data, diag);
}

}  // namespace stepprof::detail
