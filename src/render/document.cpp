#include "document.hpp"

#include <algorithm>
#include <limits>
#include <unordered_set>
#include <numeric>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "format.hpp"
#include "many_ranks.hpp"

namespace stepprof::detail {
namespace {

std::string join(const std::vector<std::int64_t>& v, std::string_view sep = ", ") {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? std::string(sep) : "") + std::to_string(v[i]);
  return s;
}

// " of its pipeline stage (stage 1)" for a stretch or lag found among one stage's ranks.
std::string of_stage(const CrossRankResult& x, const std::string& stage) {
  return stage.empty() ? std::string() : fmt::format(" of its pipeline stage ({} {})", x.stage_field, stage);
}

std::string med_p90_max(const std::optional<Summary>& s) {
  if (!s) return "-";
  return fmt::format("{} / {} / {}", num(s->median), num(s->p90), num(s->max));
}

std::string rank_list(const RunSummary& r) {
  if (r.ranks.empty()) return "unknown (no rank in the log)";
  const std::string unknown =
      r.updates_without_rank ? fmt::format("; and {} update record(s) of an unknown rank (no rank in their log)",
                                           r.updates_without_rank)
                             : std::string();
  std::string s = r.ranks.size() == 1 ? fmt::format("rank {}", r.ranks.front())
                                      : fmt::format("{} ranks ({})", r.ranks.size(), rank_numbers(r.ranks));
  if (r.world_size) s += fmt::format(" of world size {}", *r.world_size);
  if (!r.missing_ranks.empty() && r.missing_ranks.size() <= kListedUpTo)
    s += fmt::format("; no update records from rank{} {}", r.missing_ranks.size() > 1 ? "s" : "",
                     join(r.missing_ranks));
  else if (!r.missing_ranks.empty())
    s += fmt::format("; no update records from {} ranks ({})", r.missing_ranks.size(), rank_numbers(r.missing_ranks));
  return s + unknown;
}

// "0: 20, 1: 20, 2: 19" for a few ranks; for many, grouped by count: "60 each", or
// "60 (1021 ranks), 59 (ranks 3, 7, 900)".
std::string updates_per_rank(const std::vector<std::pair<std::int64_t, std::size_t>>& per) {
  std::string s;
  if (per.size() <= kListedUpTo) {
    for (const auto& [rank, n] : per) s += fmt::format("{}{}: {}", s.empty() ? "" : ", ", rank_label(rank), n);
    return s;
  }
  std::map<std::size_t, std::vector<std::int64_t>, std::greater<>> by_count;
  for (const auto& [rank, n] : per) by_count[n].push_back(rank);
  if (by_count.size() == 1) return fmt::format("{} each", by_count.begin()->first);
  for (const auto& [n, ranks] : by_count)
    s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", n,
                     ranks.size() <= kListedUpTo ? fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", join(ranks))
                                                 : fmt::format("{} ranks", ranks.size()));
  return s;
}

Section run_section(const Report& rep) {
  const RunSummary& r = rep.run;
  Section s{"run", "1. Run", {}};
  Fields f;
  f.items.emplace_back("ranks", rank_list(r));
  std::string batch;
  if (r.micro_batch && r.accumulation)
    batch = fmt::format("micro-batch {} x accumulation {} = {} samples per update per rank", *r.micro_batch,
                        *r.accumulation, *r.micro_batch * *r.accumulation);
  if (r.global_batch)
    batch += fmt::format("{}global batch {}{}", batch.empty() ? "" : "; ", *r.global_batch,
                         !r.global_batch_derived ? std::string()
                         : r.data_parallel
                             ? fmt::format(" (micro-batch x accumulation x data-parallel size {}: {})", *r.data_parallel,
                                           r.data_parallel_from)
                             : std::string(" (micro-batch x accumulation x world size)"));
  // Which of the two the config lacks (it said "no micro_batch and accumulation" when it
  // had micro_batch).
  const std::string lacks = r.micro_batch   ? "accumulation"
                            : r.accumulation ? "micro_batch"
                                             : "micro_batch and no accumulation";
  if (batch.empty() && r.micro_batch)
    batch = fmt::format("micro-batch {} per rank; samples per update unknown (the config has no accumulation)",
                        *r.micro_batch);
  f.items.emplace_back("batch", !batch.empty()        ? batch
                                : r.config.empty() ? std::string("unknown (no config record)")
                                                   : fmt::format("unknown (the config has no {})", lacks));
  if (r.global_batch_mismatch) f.items.emplace_back("warning", *r.global_batch_mismatch);
  else if (r.data_parallel_problem) f.items.emplace_back("warning", "the config's parallel sizes: " + *r.data_parallel_problem);
  std::string window = r.first_step ? fmt::format("steps {}..{}, {} update record(s)", *r.first_step, *r.last_step, r.updates)
                                    : std::string("no updates");
  if (r.step_stride > 1) window += fmt::format("; every {} steps (the log's stride)", r.step_stride);
  if (r.updates_outside_window) window += fmt::format(" ({} outside --steps not analyzed)", r.updates_outside_window);
  if (r.updates_of_other_runs)
    window += fmt::format("; {} update record(s) of another run skipped (see the mixed-runs diagnostics; --run chooses "
                          "the run)",
                          r.updates_of_other_runs);
  if (r.steps_without_record) {
    const std::string count = r.steps_without_record == std::numeric_limits<std::uint64_t>::max()
                                  ? std::string("2^64 - 1 or more")  // (the count saturates)
                                  : std::to_string(r.steps_without_record);
    window += r.updates_per_rank.size() > 1
                  ? fmt::format("; {} (rank, step) pair(s) of these steps have no update record", count)
                  : fmt::format("; {} of these steps have no update record", count);
  }
  if (r.stopped_early)
    window += fmt::format("; the config's {} is {}, and no rank's log goes beyond step {}: did the job stop early (a "
                          "crash, a kill, a time limit) or were the logs cut?",
                          r.stopped_early->field, r.stopped_early->value, *r.last_step);
  f.items.emplace_back("window", window);
  if (!r.reopened_at.empty()) {
    // (The first few: a job requeued every hour has many.)
    constexpr std::size_t kShown = 8;
    std::vector<std::string> at;
    for (std::size_t k = 0; k < std::min(kShown, r.reopened_at.size()); ++k)
      at.push_back(fmt::format("step {} ({})", r.reopened_at[k].first,
                               r.reopened_at[k].second.size() == r.updates_per_rank.size()
                                   ? std::string("every rank")
                                   : (r.reopened_at[k].second.size() == 1 ? "rank " : "ranks ") +
                                         rank_numbers(r.reopened_at[k].second)));
    f.items.emplace_back("recorder opened again",
                         fmt::format("{}{}: a config record before these updates (a job resumed from a checkpoint, "
                                     "or a rank that started late); their time counts from open()",
                                     fmt::join(at, ", "),
                                     r.reopened_at.size() > kShown
                                         ? fmt::format(" and {} more", r.reopened_at.size() - kShown)
                                         : std::string()));
  }
  if (r.updates_per_rank.size() > 1) f.items.emplace_back("updates per rank", updates_per_rank(r.updates_per_rank));
  f.items.emplace_back("nesting", r.nesting_source.empty() ? "unknown (give --hierarchy FILE for exclusive times and code paths)"
                                                          : r.nesting_source);
  for (const auto& field : r.config) f.items.emplace_back("config " + field.key, field.json);
  // (Values shown as the lowest rank has them above; here every value and its ranks.)
  constexpr std::size_t kValuesShown = 4;
  for (const auto& d : r.config_differences) {
    // A value of its own on every rank (a trace's file name, a device id in its
    // properties, a hostname): every value in full was most of a Run section of 8 traces.
    if (d.values.size() >= 3 && std::all_of(d.values.begin(), d.values.end(), [](const auto& v) {
          return v.second.size() == 1 && !v.first.empty();
        })) {
      f.items.emplace_back("config " + d.key + " differs",
                           fmt::format("a value of its own on each of {} ranks (--format json lists them all)",
                                       d.values.size()));
      continue;
    }
    std::string values;
    for (std::size_t i = 0; i < d.values.size() && i < kValuesShown; ++i)
      values += fmt::format("{}{} ({})", i ? ", " : "", d.values[i].first.empty() ? "absent" : d.values[i].first,
                            fmt::format("{} {}", d.values[i].second.size() == 1 ? "rank" : "ranks", rank_numbers(d.values[i].second)));
    if (d.values.size() > kValuesShown) values += fmt::format(" and {} more values", d.values.size() - kValuesShown);
    f.items.emplace_back("config " + d.key + " differs", values);
  }
  f.items.emplace_back("input", file_list(r.files));
  s.blocks.emplace_back(std::move(f));
  return s;
}

std::string rate_cell(const std::optional<double>& v) { return v ? sig3(*v) : "-"; }

// A coefficient of variation, or "-" for fewer than 2 values (the JSON's null: one value
// does not vary, nor is it known not to).
std::string cv_text(const Summary& s) { return s.n < 2 ? std::string("-") : pct(s.cv); }

Section time_section(const Report& rep) {
  const auto& t = rep.time;
  Section s{"update-time", "2. Update time and throughput", {}};
  if (!t.update_ms) {
    s.blocks.emplace_back(Paragraph{"No updates to analyze."});
    return s;
  }
  const Summary& u = *t.update_ms;
  Fields f;
  f.items.emplace_back(rep.run.ranks.size() > 1 ? "update time (slowest rank per step)" : "update time (wall_ms)",
                       fmt::format("median {}, p10 {}, p90 {}, min {}, max {}; CV {} over {} update{}", ms(u.median),
                                   ms(u.p10), ms(u.p90), ms(u.min), ms(u.max), cv_text(u), u.n, u.n == 1 ? "" : "s"));
  if (const auto& g = t.gpu_busy) {
    std::string v = fmt::format("idle {} of the update (median; p10 {}, p90 {}): {} idle, {} busy per update "
                                "(medians) over {}",
                                pct(g->idle_fraction.median), pct(g->idle_fraction.p10), pct(g->idle_fraction.p90),
                                ms(g->idle_ms.median), ms(g->busy_ms.median), describe_gpu_busy_updates(*g));
    if (g->most_idle_rank)
      v += fmt::format("; most idle: rank {}, {} (median)", *g->most_idle_rank, pct(g->most_idle_fraction));
    f.items.emplace_back("GPU idle (trace)", v + "; busy: any kernel, copy or memset running, on any stream");
  }
  s.blocks.emplace_back(std::move(f));
  if (!t.per_rank_ms.empty()) {
    Table pr{{"rank", "median ms", "p90 ms", "max ms", "CV"}, {}, {}};
    const auto& per = t.per_rank_ms;
    auto median_of = [&](std::size_t i) { return per[i].second.median; };
    // The same ranks as the HTML charts: the slowest, the fastest and every flagged one.
    const auto shown = rows_that_matter(per.size(), median_of,
                                        [&](std::size_t i) { return flagged_rank(rep.cross_rank, per[i].first); });
    auto add = [&](std::size_t i) {
      const auto& [rank, sum] = per[i];
      pr.rows.push_back({rank_label(rank), num(sum.median), num(sum.p90), num(sum.max), cv_text(sum)});
    };
    if (!shown)
      for (std::size_t i = 0; i < per.size(); ++i) add(i);
    else
      for (auto i : *shown) add(i);
    s.blocks.emplace_back(std::move(pr));
    if (shown)
      s.blocks.emplace_back(rows_left_out(per.size(), *shown, median_of,
                                          [&](std::size_t i) { return flagged_rank(rep.cross_rank, per[i].first); },
                                          "median update time", ", with the stragglers and the ranks that fell behind"));
  }
  Table tab{{"throughput", "per rank /s", "whole job /s", "how"}, {}, {}};
  auto row = [&](const std::string& name, const Rate& r, std::string how) {
    if (!r.per_rank_per_s) return;
    if (r.job_estimated)
      how = rep.run.world_size
                ? fmt::format("job = per rank x {} ranks (estimated)", *rep.run.world_size)
                : fmt::format("job = sum over the {} ranks' logs (no config gives the world size)", rep.run.ranks.size());
    tab.rows.push_back({name, rate_cell(r.per_rank_per_s), rate_cell(r.job_per_s), how});
  };
  std::string samples_how = "sum over the ranks' logs";
  Rate samples = t.samples;
  if (t.global_samples_per_s) {
    samples.job_per_s = t.global_samples_per_s;
    samples.job_estimated = false;
    samples_how = fmt::format("job = global batch {} per update", *rep.run.global_batch);
  }
  row("samples", samples, samples_how);
  // With model parallelism (tensor, pipeline) the ranks that share a micro-batch each log
  // its tokens and frames: the global batch says how many data-parallel ranks there are.
  std::string sum_how = "sum over the ranks' logs", sum_how_again = sum_how;
  const auto& run = rep.run;
  // (The config's data-parallel size where it gives one, else the global batch's.)
  if (run.world_size && (run.data_parallel ||
                         (run.global_batch && !run.global_batch_derived && run.micro_batch && run.accumulation &&
                          *run.micro_batch > 0 && *run.accumulation > 0 &&
                          *run.global_batch % (*run.micro_batch * *run.accumulation) == 0))) {
    const std::int64_t dp =
        run.data_parallel ? *run.data_parallel : *run.global_batch / (*run.micro_batch * *run.accumulation);
    if (dp > 0 && dp < *run.world_size && *run.world_size % dp == 0) {
      const std::int64_t shared = *run.world_size / dp;
      sum_how += run.data_parallel
                     ? fmt::format("; each micro-batch is on {} ranks ({} data-parallel rank{} of {}: {}): divide by "
                                   "{} where they all log it",
                                   shared, dp, dp == 1 ? "" : "s", *run.world_size, run.data_parallel_from, shared)
                     : fmt::format("; each micro-batch is on {} ranks (global batch {} = {} x {} x {} data-parallel "
                                   "ranks of {}): divide by {} where they all log it",
                                   shared, *run.global_batch, *run.micro_batch, *run.accumulation, dp, *run.world_size,
                                   shared);
      sum_how_again += fmt::format(" (divide by {}, as above)", shared);
    }
  }
  bool said = false;
  for (const auto& [name, r] : {std::pair{"token slots", &t.token_slots}, std::pair{"valid tokens", &t.valid_tokens},
                                std::pair{"frames", &t.frames}}) {
    if (!r->per_rank_per_s) continue;  // (as row() does)
    row(name, *r, said ? sum_how_again : sum_how);
    said = true;
  }
  tab.text_last = true;  // ("how": prose)
  if (!tab.rows.empty()) s.blocks.emplace_back(std::move(tab));
  if (t.samples_per_update_counted) {
    Fields check;
    check.items.emplace_back(
        "samples check",
        fmt::format("the samples counter gives {:g} per update per rank (median), the config's micro_batch x "
                    "accumulation {:g}: one of them is wrong (a count made once per update, not per micro-batch? "
                    "the config's accumulation?), and the per-rank and whole-job rates above disagree",
                    *t.samples_per_update_counted, *t.samples_per_update_config));
    s.blocks.emplace_back(std::move(check));
  }
  return s;
}

std::string gap_cell(const RegionRow& r) {
  if (!r.gap_ms) return "-";
  std::string g = num(*r.gap_ms);
  if (r.gap == TimeGap::kDeviceLonger) g += " device>>host";
  if (r.gap == TimeGap::kHostLonger) g += " host>>device";
  return g;
}

Section regions_section(const Report& rep) {
  const auto& t = rep.regions;
  Section s{"regions", "3. Regions (ms per update: median / p90 / max)", {}};
  Table tab{{"region", "device ms", "host ms", "calls", "share", "self ms (median)", "self share", "device-host ms"},
            {},
            {}};
  const bool nesting = t.nesting_known;
  std::unordered_set<std::string_view> parents;
  for (const auto& r : t.rows)
    if (!r.parent.empty()) parents.insert(r.parent);
  bool device_partial = false;
  for (const auto& r : t.rows) {
    std::string name = r.name;
    if (nesting && !r.in_hierarchy) name += " (not in nesting)";
    if (r.updates_present < t.updates) name += fmt::format(" [{}/{} updates]", r.updates_present, t.updates);
    const auto& self = r.device_self_ms ? r.device_self_ms : r.host_self_ms;
    std::string calls = "-";
    if (r.calls)
      calls = r.calls->min == r.calls->max ? integer(r.calls->median)
                                           : fmt::format("{}..{}", integer(r.calls->min), integer(r.calls->max));
    // A parent without a self time (a trace's region with device busy time only, which
    // does not subtract) is not a leaf.
    const bool leaf = !parents.contains(r.name);
    // Host time as median / p90 / max where the region has no device time (the title's
    // promise; a host-only log showed the median only), else its median.
    const std::string host = !r.host_ms ? "-" : r.device_ms ? num(r.host_ms->median) : med_p90_max(r.host_ms);
    // A device time in fewer of its updates than its host time (device timing off in some
    // ranks or updates): the two medians are over different updates, which is marked.
    std::string device = med_p90_max(r.device_ms);
    if (r.device_ms && r.host_ms && r.device_ms->n < r.host_ms->n) {
      device += fmt::format(" [{} of {}]", r.device_ms->n, r.host_ms->n);
      device_partial = true;
    }
    tab.rows.push_back({name, device, host, calls, pct(r.share),
                        self ? num(self->median) : (!nesting ? "n/a" : leaf ? "(leaf)" : "-"),
                        r.self_share ? pct(*r.self_share) : (!nesting ? "n/a" : "-"), gap_cell(r)});
    tab.depth.push_back(r.depth);
  }
  if (t.outside_regions_ms) {
    tab.rows.push_back({"(outside every region)", "-", num(t.outside_regions_ms->median), "-", "-",
                        num(t.outside_regions_ms->median), "-", "-"});
    tab.depth.push_back(0);
  }
  s.blocks.emplace_back(std::move(tab));
  std::vector<std::string> notes;
  notes.push_back(
      "share: the region's total time over the window / the total update time (device time where recorded); "
      "nested regions overlap, so shares of a parent and its children add up to more than the parent");
  if (!nesting)
    notes.push_back("exclusive (self) times need the nesting: the log does not record it; give --hierarchy FILE");
  if (nesting && t.device_busy_union)
    notes.push_back("self ms and self share are host time: the device times here are each region's busy time over "
                    "its kernels on every stream, which do not subtract; share uses device time where recorded, so a "
                    "region's self share can exceed its share, and a child's share its parent's");
  const bool any_gap = std::any_of(t.rows.begin(), t.rows.end(), [](const RegionRow& r) { return r.gap != TimeGap::kNone; });
  const bool any_device = std::any_of(t.rows.begin(), t.rows.end(), [](const RegionRow& r) { return r.device_ms.has_value(); });
  if (!any_device)
    notes.push_back("device-host: the log has host times only (no cuda_stream_ms), so shares use host time");
  std::string background;
  for (const auto& r : t.rows)
    if (r.background) background += (background.empty() ? "" : ", ") + r.name;
  if (!background.empty())
    notes.push_back("background (role \"background\": on another thread, alongside the update, not part of it; its "
                    "time is summed over its threads and calls, so its share of the update time can exceed 100 %): " +
                    background);
  if (device_partial)
    notes.push_back("device ms [n of m]: the region has a device time in n of the m updates with its host time "
                    "(device timing off in some ranks or updates), so its device and host medians are over different "
                    "updates; device-host pairs the updates that have both");
  if (any_device)  // (without device times, the note above says so)
    notes.push_back(any_gap ? "device-host: regions flagged where the median device-minus-host time exceeds max(1 ms, 20 %)"
                          : "device-host: no region's device and host times differ by more than max(1 ms, 20 %)");
  if (t.violation_count)
    notes.push_back(fmt::format("the nesting does not fit the data in {} (update, parent) pair(s), e.g. step {}: "
                                "children of {} sum to {}{} against {}",
                                t.violation_count, t.violations.front().step, t.violations.front().parent,
                                ms(t.violations.front().children_ms), violation_children_text(t.violations.front()),
                                ms(t.violations.front().parent_ms)));
  if (!t.not_in_log.empty()) {
    constexpr std::size_t kNamed = 20;  // (the JSON report lists them all)
    std::string names;
    for (std::size_t i = 0; i < std::min(kNamed, t.not_in_log.size()); ++i)
      names += (names.empty() ? "" : ", ") + t.not_in_log[i];
    if (t.not_in_log.size() > kNamed) names += fmt::format(" and {} more", t.not_in_log.size() - kNamed);
    notes.push_back("in the nesting but never in the log: " + names);
  }
  for (auto& n : notes) s.blocks.emplace_back(Paragraph{std::move(n)});
  return s;
}

Section paths_section(const Report& rep) {
  Section s{"code-paths", "4. Code paths", {}};
  if (!rep.paths.nesting_known) {
    s.blocks.emplace_back(Paragraph{"unknown: alternative code paths are marked in the nesting (alt=GROUP); "
                                    "give --hierarchy FILE"});
    return s;
  }
  if (rep.paths.groups.empty()) {
    s.blocks.emplace_back(Paragraph{"the nesting marks no alternative code paths"});
    return s;
  }
  for (const auto& g : rep.paths.groups) {
    std::string members;
    for (const auto& p : g.paths) members += (members.empty() ? "" : " | ") + p.region;
    s.blocks.emplace_back(Paragraph{fmt::format("group {}{}: {}", g.group,
                                                g.parent.empty() ? "" : fmt::format(" (in {})", g.parent), members)});
    Table tab{{"path", "updates", "micro-batches", "samples", "frames", "total ms", "ms/sample", "ms/frame",
               "ms/micro-batch"},
              {},
              {}};
    auto opt = [](const std::optional<double>& v) { return v ? integer(*v) : std::string("-"); };
    for (const auto& p : g.paths)
      tab.rows.push_back({p.region + (p.device ? "" : " (host)"), std::to_string(p.updates), opt(p.microbatches),
                          opt(p.samples), opt(p.frames), num(p.total_ms), p.ms_per_sample ? num(*p.ms_per_sample) : "-",
                          p.ms_per_frame ? num(*p.ms_per_frame) : "-",
                          p.ms_per_microbatch ? num(*p.ms_per_microbatch) : "-"});
    s.blocks.emplace_back(std::move(tab));
    std::string from_detail;
    for (const auto& p : g.paths)
      if (p.work_from_microbatches) from_detail += (from_detail.empty() ? "" : ", ") + p.region;
    if (!from_detail.empty())
      s.blocks.emplace_back(Paragraph{fmt::format(
          "Work of {} counted from the per-micro-batch detail (the log has no counters for it).", from_detail)});
    std::string from_update;
    for (const auto& p : g.paths)
      if (p.work_from_update) from_update += (from_update.empty() ? "" : ", ") + p.region;
    if (!from_update.empty())
      s.blocks.emplace_back(Paragraph{fmt::format(
          "Work of {} taken from the update's own samples and frames counters, in the updates where no other path "
          "of {} ran (unknown where several did): the log has no counters of the paths' own. Per-path counters "
          "(<path>_frames, <path>_samples) or the recorder's microbatch() give every update's.",
          from_update, g.group)});
    if (std::none_of(g.paths.begin(), g.paths.end(), [](const PathCost& p) {
          return p.ms_per_sample || p.ms_per_frame || p.ms_per_microbatch;
        }))
      s.blocks.emplace_back(Paragraph{
          "No cost per unit of work: the log gives no path's work. Count each path's work (counters <path>_frames, "
          "<path>_samples, <path>_microbatches; docs/hierarchy-format.md), record micro-batches with microbatch() "
          "naming the path, or count the update's frames and samples (used where one path of the group ran alone)."});
    if (g.similar_cost) {
      s.blocks.emplace_back(Paragraph{fmt::format(
          "The paths cost within 10 % of each other per {} ({:.2f}x): neither is a slow path here.", g.unit,
          *g.slow_over_fast)});
      continue;
    }
    if (!g.slow_over_fast) continue;
    std::vector<std::string> lines;
    lines.push_back(fmt::format("{} costs {:.2f}x {} per {}.", g.slow, *g.slow_over_fast, g.fast, g.unit));
    lines.push_back(fmt::format("{} ran in {} of {} updates; {} updates ran only the fast path.", g.slow,
                                g.updates_with_slow, g.updates, g.updates_fast_only));
    if (const auto& mm = g.microbatch_mixing) {
      std::string only = mm->frame_counts_only_with_slow.empty()
                             ? std::string("no frame count occurs only in micro-batches that took it")
                             : fmt::format("every micro-batch with a sample of {} frames took it",
                                           join(mm->frame_counts_only_with_slow));
      lines.push_back(fmt::format(
          "Cause in the data (per micro-batch, from the micro-batch detail): {}; {} of {} micro-batches that took {} "
          "mixed several frame counts, against {} of {} that took {}.",
          only, mm->slow_mixed, mm->slow, g.slow, mm->fast_mixed, mm->fast, g.fast));
    } else if (g.updates_fast_only == 0 || g.updates_with_slow == 0) {
      lines.push_back(fmt::format("Cause in the data: cannot tell, since {} updates ran {}: no update to compare with.",
                                  g.updates_fast_only == 0 ? "all" : "no", g.slow));
    } else if (!g.frame_counts.empty()) {
      std::string only = g.frame_counts_only_with_slow.empty()
                             ? std::string("no frame count occurs only in updates that ran it")
                             : fmt::format("every update with a sample of {} frames ran it",
                                           join(g.frame_counts_only_with_slow));
      lines.push_back(fmt::format(
          "Cause in the data: {}; {} of {} updates that ran {} mixed several frame counts, against {} of {} updates "
          "that ran only the fast path.",
          only, g.slow_updates_mixed_frames, g.updates_with_slow, g.slow, g.fast_only_updates_mixed_frames,
          g.updates_fast_only));
    } else if (g.frames_logged) {
      lines.push_back(
          "Cause in the data: cannot tell, since the log's frame counts are in micro-batches that do not say which "
          "path they took (or list frames for one path only).");
    } else if (!g.length_split) {
      lines.push_back(
          "Cause in the data: cannot tell, since the log has no frame counts (a frame histogram, or micro-batch "
          "detail with frames).");
    }
    if (const auto& ls = g.length_split) {
      lines.push_back(
          ls->apart ? fmt::format("Cause in the data (per micro-batch, its padded length, else its longest sample's "
                                  "tokens): {}: a length limit selects it.",
                                  length_split_text(g, false))
                    : fmt::format("Micro-batch lengths (padded, else the longest sample's tokens) do not tell the "
                                  "paths apart: {} {}..{}, {} {}..{} tokens.",
                                  g.slow, ls->slow_min, ls->slow_max, g.fast, ls->fast_min, ls->fast_max));
    }
    const bool several = rep.run.ranks.size() > 1;
    if (g.saving_ms_per_update)
      lines.push_back(
          several ? fmt::format("Doing all of {}'s work at {}'s cost per {} would save {} of compute per rank and "
                                "update (mean over every rank's updates); the step waits for its slowest rank, so a "
                                "slow path on one rank can cost the whole step its excess: up to {} per update "
                                "(mean over steps of the largest excess of a rank in the step; {}).",
                                g.slow, g.fast, g.unit, ms(*g.saving_ms_per_update),
                                ms(g.step_saving_at_most_ms.value_or(*g.saving_ms_per_update)),
                                // (The what-if replays samples' frame counts: without them it
                                // stops, so it is not offered as the next step then.)
                                g.frames_logged ? "stepprof whatif batched-geometry with every rank's log prices it"
                                                : "with the samples' frame counts in the log (frame_histogram, or "
                                                  "frames in the micro-batch detail), stepprof whatif "
                                                  "batched-geometry would price it")
                  : fmt::format("Doing all of {}'s work at {}'s cost per {} would save {} per update of this rank's "
                                "compute.",
                                g.slow, g.fast, g.unit, ms(*g.saving_ms_per_update)));
    if (!g.costliest.empty())
      lines.push_back(fmt::format("Where {} cost most beyond the same work on {}: {}.", g.slow, g.fast,
                                  slow_updates_text(g.costliest, g.costliest.size())));
    for (auto& l : lines) s.blocks.emplace_back(Paragraph{std::move(l)});
    if (!g.frame_counts.empty() && g.updates_fast_only > 0 && g.updates_with_slow > 0) {
      Table fc{{"frames per sample", "samples", "updates with it", fmt::format("... that ran {}", g.slow)}, {}, {}};
      for (const auto& e : g.frame_counts)
        fc.rows.push_back({std::to_string(e.frames), std::to_string(e.samples), std::to_string(e.updates_with),
                           std::to_string(e.updates_with_slow)});
      s.blocks.emplace_back(std::move(fc));
    }
  }
  return s;
}

Section padding_section(const Report& rep) {
  const auto& p = rep.padding;
  Section s{"padding", "5. Padding", {}};
  if (!p.available) {
    s.blocks.emplace_back(Paragraph{"unknown: " + p.why_not});
    return s;
  }
  Fields f;
  f.items.emplace_back("padding (token-weighted)",
                       fmt::format("{} of {} token slots ({} padding slots per update per rank)", pct(p.fraction),
                                   integer(p.token_slots), integer(p.padding_slots_per_update)));
  if (p.per_update_fraction)
    f.items.emplace_back("per update", fmt::format("median {}, p90 {}, max {}", pct(p.per_update_fraction->median),
                                                   pct(p.per_update_fraction->p90), pct(p.per_update_fraction->max)));
  if (p.padding_slots_per_s)
    f.items.emplace_back("padding token slots/s", fmt::format("{} per rank", sig3(*p.padding_slots_per_s)));
  if (p.max_padded_length) f.items.emplace_back("longest padded length", integer(*p.max_padded_length) + " tokens");
  if (p.spike_threshold) {
    std::string list;
    for (const auto& x : p.spikes)
      list += fmt::format("{}rank {} step {}: {}{}", list.empty() ? "" : "; ", rank_label(x.rank), x.step, pct(x.fraction),
                          x.padded_length ? fmt::format(" (padded to {} tokens)", integer(*x.padded_length)) : "");
    if (p.spike_count > p.spikes.size()) list += fmt::format("; and {} more", p.spike_count - p.spikes.size());
    f.items.emplace_back("spikes", p.spike_count == 0
                                       ? fmt::format("none (no update above {}: p90 + 20 points)", pct(*p.spike_threshold))
                                       : fmt::format("{} update(s) above {} (p90 + 20 points): {}", p.spike_count,
                                                     pct(*p.spike_threshold), list));
  }
  if (p.cost_ms_per_update) {
    std::string regs;
    for (const auto& r : p.token_bound)
      regs += fmt::format("{}{} (r = {:.2f} with token slots, median {})", regs.empty() ? "" : ", ", r.region,
                          r.correlation, ms(r.median_ms));
    if (p.min_correlation > 0.4)
      regs += fmt::format(" (r >= {:.3g} counted: over {} updates a smaller r may be chance)", p.min_correlation,
                          p.cost_updates);
    f.items.emplace_back("cost estimate", fmt::format("{} per update: padding fraction x time of {}, assuming that "
                                                      "time is proportional to token slots",
                                                      ms(*p.cost_ms_per_update), regs));
  } else {
    std::string none = fmt::format("no region's time follows token slots (r >= {:.3g}{}) in this window",
                                   p.min_correlation,
                                   p.min_correlation > 0.4
                                       ? fmt::format(": over {} updates a smaller r may be chance", p.cost_updates)
                                       : "");
    if (p.cost_updates > 0 && p.cost_updates < 3)
      none = fmt::format("cannot tell which region's time follows token slots from {} update(s) (a correlation needs "
                         "3 or more)",
                         p.cost_updates);
    else if (p.closest_below || (p.token_slots_cv && *p.token_slots_cv < 0.1)) {
      if (p.closest_below)
        none += fmt::format("; the closest: {} (r = {:.3g})", p.closest_below->region, p.closest_below->correlation);
      if (p.token_slots_cv && *p.token_slots_cv < 0.1)
        none += fmt::format("{} by {} (coefficient of variation): too little spread for a time to follow",
                            p.closest_below ? ", with token slots per update varying" : "; token slots per update vary",
                            pct(*p.token_slots_cv));
    }
    f.items.emplace_back("cost estimate", p.cost_needs_nesting
                                              ? "needs the nesting (leaf regions do not overlap): give --hierarchy FILE"
                                              : none);
  }
  if (!p.outside_nesting.empty()) {
    std::string names;
    for (const auto& r : p.outside_nesting)
      names += fmt::format("{}{} (r = {:.3g})", names.empty() ? "" : ", ", r.region, r.correlation);
    const bool from_log = rep.regions.nesting_source == kNestingFromLog;
    f.items.emplace_back("not in the nesting",
                         fmt::format("{} {} token slots but {} not in the nesting, so not counted: {}",
                                     names, p.outside_nesting.size() == 1 ? "follows" : "follow",
                                     p.outside_nesting.size() == 1 ? "is" : "are",
                                     from_log ? "the log's `parents` do not place it (give --hierarchy FILE to)"
                                              : fmt::format("add {} to the --hierarchy file (a misspelt name?)",
                                                            p.outside_nesting.size() == 1 ? "it" : "them")));
  }
  s.blocks.emplace_back(std::move(f));
  return s;
}

void cross_rank_blocks(const CrossRankResult& x, Section& s) {
  if (!x.available) {
    if (!x.why_not.empty())
      s.blocks.emplace_back(Paragraph{fmt::format("Cross-rank: not available ({}).", x.why_not)});
    return;
  }
  Fields f;
  const std::size_t left_out = x.ranks_short.size() + x.ranks_without_comm.size();
  f.items.emplace_back("cross-rank", left_out == 0 ? fmt::format("{} ranks, {} update{} compared (in every rank's log, each rank's own work known)",
                                                                 x.ranks, x.steps_aligned, x.steps_aligned == 1 ? "" : "s")
                                                   : fmt::format("{} ranks ({} compared, see below), {} update{} "
                                                                 "compared (in every compared rank's log, each "
                                                                 "rank's own work known)",
                                                                 x.ranks, x.ranks - left_out, x.steps_aligned,
                                                                 x.steps_aligned == 1 ? "" : "s"));
  // "steps 30..40 (no rank 3); step 52 (no rank 1); and 4 more"
  auto runs_text = [](const std::vector<StepRun>& runs, std::size_t total, std::string_view ranks_word) {
    std::string ex;
    std::size_t shown = 0;
    for (const auto& r : runs) {
      ex += ex.empty() ? "" : "; ";
      ex += r.steps == 1 ? fmt::format("step {}", r.first_step)
                         : fmt::format("steps {}..{}{}", r.first_step, r.last_step,
                                       r.last_step - r.first_step + 1 == static_cast<std::int64_t>(r.steps)
                                           ? std::string()
                                           : fmt::format(" ({} of them)", r.steps));
      ex += fmt::format(" ({}{})", ranks_word, rank_numbers(r.ranks));
      shown += r.steps;
    }
    if (shown < total) ex += fmt::format("; and {} more", total - shown);
    return ex;
  };
  if (x.steps_incomplete)
    f.items.emplace_back("steps not in every log",
                         fmt::format("{} not analyzed across ranks: {}", x.steps_incomplete,
                                     runs_text(x.incomplete_examples, x.steps_incomplete, "no rank ")));
  if (x.steps_without_comm)
    f.items.emplace_back(fmt::format("steps without {}", x.comm_region),
                         fmt::format("{} not analyzed across ranks (a rank's own work is unknown there: its wall time "
                                     "holds its wait): {}",
                                     x.steps_without_comm, runs_text(x.without_comm_examples, x.steps_without_comm, "rank ")));
  if (x.steps_bad_wall)
    f.items.emplace_back(fmt::format("steps with a wall time of 0 or below {}", x.comm_region),
                         fmt::format("{} not analyzed across ranks (a rank's own work is unknown there): {}",
                                     x.steps_bad_wall, runs_text(x.bad_wall_examples, x.steps_bad_wall, "rank ")));
  if (!x.ranks_missing.empty())
    f.items.emplace_back("ranks without update records", rank_numbers(x.ranks_missing));
  if (!x.ended_early.empty()) {
    // (Grouped by last step: a node that died takes 8 ranks at once.)
    std::map<std::int64_t, std::vector<std::int64_t>> by_last;
    for (const auto& e : x.ended_early) by_last[e.last_step].push_back(e.rank);
    std::string which;
    for (const auto& [last, ranks] : by_last)
      which += fmt::format("{}{} {} (last step {})", which.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                           rank_numbers(ranks), last);
    f.items.emplace_back(
        "logs that end early",
        fmt::format("{}: before the other ranks' last step; did they crash, hang or get killed?{}", which,
                    x.steps_after_end > 0
                        ? fmt::format(" ({} step(s) after are searched for stretches of falling behind among the ranks "
                                      "still logging)",
                                      x.steps_after_end)
                        : std::string()));
  }
  if (!x.ranks_short.empty()) {
    std::string which;
    if (x.ranks_short.size() <= 8) {
      for (const auto& [rank, steps] : x.ranks_short)
        which += fmt::format("{}rank {} ({} of {} steps)", which.empty() ? "" : ", ", rank, steps, x.steps_total);
    } else {  // (64 late ranks were listed one by one)
      std::vector<std::int64_t> ranks;
      std::size_t lo = x.ranks_short.front().second, hi = lo;
      for (const auto& [rank, steps] : x.ranks_short) {
        ranks.push_back(rank);
        lo = std::min(lo, static_cast<std::size_t>(steps));
        hi = std::max(hi, static_cast<std::size_t>(steps));
      }
      which = fmt::format("ranks {} ({} of {} steps)", rank_numbers(ranks),
                          lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi), x.steps_total);
    }
    f.items.emplace_back("ranks left out",
                         fmt::format("{}: left out of the comparison, which with them would cover only the steps "
                                     "every rank holds (did their job start late or stop early, or lose records?)",
                                     which));
  }
  if (!x.ranks_without_comm.empty())
    f.items.emplace_back(
        fmt::format("ranks without {}", x.comm_region),
        fmt::format("{}: not in half of their updates or more; left out of the comparison (their own work would be "
                    "their whole wall_ms, waits "
                    "included, and they would look like stragglers); does their log name the region differently?",
                    rank_numbers(x.ranks_without_comm)));
  if (x.window_skew) f.items.emplace_back("step entries", describe_window_skew(*x.window_skew));
  f.items.emplace_back(
      "method",
      x.comm_region.empty()
          ? std::string("no communication region: each rank's own work is its whole wall_ms, so ranks that wait look as "
                        "slow as the straggler")
          : fmt::format("own work = wall_ms - {} (found by {}); the slowest rank has the most own work; another rank's "
                        "wait = slowest rank's own work - its own (a lower bound: {} may hold compute, and a rank "
                        "late to one collective of several makes the others wait there without more own work in "
                        "the whole step)",
                        x.comm_region, x.comm_found_by, x.comm_region));
  f.items.emplace_back("scores", fmt::format("NVIDIA straggler-detection scores: relative = fastest rank's median own "
                                             "work / this rank's, individual = its best / its median; straggler if "
                                             "relative < {:.2f} over {} or more updates",
                                             x.threshold, kMinStragglerUpdates));
  if (x.margin_ms)
    f.items.emplace_back("slowest vs median rank",
                         fmt::format("median {}, max {} per update{}", ms(x.margin_ms->median), ms(x.margin_ms->max),
                                     x.per_rank.size() == 2
                                         ? " (with two ranks the median rank is their mean: a margin is half the gap "
                                           "between them)"
                                         : ""));
  f.items.emplace_back("stragglers", x.steps_aligned < kMinStragglerUpdates
                                         ? fmt::format("none flagged: {} update(s) compared, at least {} are needed to "
                                                       "tell a slow rank from a slow update",
                                                       x.steps_aligned, kMinStragglerUpdates)
                                     // (A rank behind in a stretch only is no straggler of the whole run:
                                     // "none flagged" right above "rank 3 fell behind" read as a contradiction.)
                                     : x.stragglers.empty() && !x.episodes.empty()
                                         ? std::string("none over the whole run (stretches of falling behind: below)")
                                     : x.stragglers.empty()                ? std::string("none flagged")
                                     : x.stragglers.size() <= kListedUpTo ? "rank " + join(x.stragglers, ", rank ")
                                                                          : fmt::format("{} ranks: {}", x.stragglers.size(),
                                                                                        rank_numbers(x.stragglers)));
  // (kEpisodesListed of them, then a count: a slow pipeline stage of 1,024 ranks made
  // 1,024 stretches of 2 lines each here; every one is in --format json.)
  constexpr std::size_t kEpisodesListed = 8;
  std::string episodes;
  // (Index loops, not std::views: clang 14, which builds the fuzz targets, cannot compile
  // libstdc++ 12's ranges.)
  // The kEpisodesListed with the most time at stake (excess_ms), in step order.
  std::vector<std::size_t> listed(x.episodes.size());
  std::iota(listed.begin(), listed.end(), std::size_t{0});
  if (listed.size() > kEpisodesListed) {
    std::stable_sort(listed.begin(), listed.end(),
                     [&](std::size_t a, std::size_t b) { return x.episodes[a].excess_ms > x.episodes[b].excess_ms; });
    listed.resize(kEpisodesListed);
    std::sort(listed.begin(), listed.end());
  }
  for (const std::size_t k : listed) {
    const auto& e = x.episodes[k];
    episodes += fmt::format("{}rank {}, steps {}..{} (far behind in {} of {} updates{}, {} behind the median rank{}{})",
                            episodes.empty() ? "" : "; ", e.rank, e.first_step, e.last_step, e.behind, e.updates,
                            e.steps_not_compared > 0 ? fmt::format(" compared, {} not", e.steps_not_compared)
                                                     : std::string(),
                            ms(e.margin_ms), of_stage(x, e.stage),
                            e.shared > 0 ? fmt::format("; {} {} behind too in {} of them",
                                                       e.alongside.size() == 1 ? "rank" : "ranks", join(e.alongside),
                                                       e.shared)
                                         : std::string());
  }
  if (x.episodes.size() > kEpisodesListed) {
    std::vector<std::int64_t> more;
    for (std::size_t k = 0; k < x.episodes.size(); ++k)
      if (!std::binary_search(listed.begin(), listed.end(), k)) more.push_back(x.episodes[k].rank);
    std::sort(more.begin(), more.end());
    const auto ranks = static_cast<std::size_t>(std::unique(more.begin(), more.end()) - more.begin());
    const std::size_t n = x.episodes.size() - listed.size();
    episodes += fmt::format("; and {} more {}, of {} {} (all in --format json)", n, n == 1 ? "stretch" : "stretches",
                            ranks == 1 ? "rank" : "ranks", rank_numbers(more));
  }
  f.items.emplace_back("fell behind for a while",
                       episodes.empty() ? fmt::format("no rank (a stretch of 3 or more updates more than {} behind "
                                                      "the median rank, at most 2 others between two, beyond chance: "
                                                      "docs/report-json.md, `episodes`)",
                                                      ms(x.episode_threshold_ms))
                                        : episodes);
  if (!x.recurring.empty()) {
    std::string scattered;
    constexpr std::size_t kListed = 8;  // (then a count; every one is in --format json)
    for (std::size_t k = 0; k < x.recurring.size() && k < kListed; ++k) {
      const RecurringLag& g = x.recurring[k];
      scattered += fmt::format("{}rank {} in {} of {} updates{} ({} behind{}, median{}; steps {}{})",
                               scattered.empty() ? "" : "; ", g.rank, g.behind, g.updates,
                               g.every ? fmt::format(", every {} steps", *g.every) : std::string(), ms(g.margin_ms),
                               g.stage.empty() ? std::string() : " the median rank" + of_stage(x, g.stage),
                               g.paths_scaled ? fmt::format("; found beyond {} on own work less slow paths' excess",
                                                            ms(g.threshold_ms))
                                              : std::string(),
                               fmt::join(g.steps.begin(), g.steps.begin() + static_cast<std::ptrdiff_t>(
                                                                              std::min<std::size_t>(g.steps.size(), 8)),
                                         ", "),
                               g.behind > 8 ? ", ..." : "");
    }
    if (x.recurring.size() > kListed)
      scattered += fmt::format("; and {} more (all in --format json)", x.recurring.size() - kListed);
    f.items.emplace_back("behind now and then", scattered);
  }
  if (!x.group_stretches.empty()) {
    std::string together;
    constexpr std::size_t kGroupsListed = 8;  // (then a count; every one is in --format json)
    for (std::size_t k = 0; k < x.group_stretches.size() && k < kGroupsListed; ++k) {
      const auto& g = x.group_stretches[k];
      together += fmt::format("{}ranks {} ({} = {}), steps {}..{}: {:.2f}x their median own work, the other ranks "
                              "{:.2f}x",
                              together.empty() ? "" : "; ", rank_numbers(g.ranks), g.key, g.value, g.first_step,
                              g.last_step, g.factor, g.others_factor);
    }
    if (x.group_stretches.size() > kGroupsListed)
      together += fmt::format("; and {} more (all in --format json)", x.group_stretches.size() - kGroupsListed);
    f.items.emplace_back("slowed down together", together);
  }
  if (const auto& g = x.slow_group) {
    auto ranks = [](const std::vector<std::int64_t>& v) {
      return fmt::format("{} {}", v.size() == 1 ? "rank" : "ranks", rank_numbers(v));
    };
    f.items.emplace_back("slower ranks",
                         fmt::format("{}: own work {} against {} on {} (mean), apart in {} of {} updates; the update "
                                     "ends {} later for them (mean)",
                                     ranks(g->slow), ms(g->slow_ms), ms(g->fast_ms), ranks(g->fast), g->updates_apart,
                                     g->updates, ms(g->at_stake_ms)));
  }
  s.blocks.emplace_back(std::move(f));

  Table t{{"rank", "own work ms (median)", "slowest in", "wait ms (median / max)", "relative score", "individual score",
           "single-rank wait ms", "straggler"},
          {},
          {}};
  auto own_work = [&](std::size_t i) { return x.per_rank[i].compute_ms.median; };
  auto flagged = [&](std::size_t i) { return flagged_rank(x, x.per_rank[i].rank); };
  const auto shown = rows_that_matter(x.per_rank.size(), own_work, flagged);
  std::vector<std::size_t> rows;
  if (shown) rows = *shown;
  else
    for (std::size_t i = 0; i < x.per_rank.size(); ++i) rows.push_back(i);
  for (const auto i : rows) {
    const auto& r = x.per_rank[i];
    t.rows.push_back({std::to_string(r.rank), num(r.compute_ms.median),
                      fmt::format("{} of {}", r.times_slowest, x.steps_aligned),
                      fmt::format("{} / {}", num(r.wait_ms.median), num(r.wait_ms.max)),
                      fmt::format("{:.2f}", r.relative_score), fmt::format("{:.2f}", r.individual_score),
                      r.single_rank_wait_median_ms
                          ? num(*r.single_rank_wait_median_ms) + (r.single_rank_waiting ? " (waiting)" : "")
                          : "-",
                      r.straggler ? "yes" : ""});
  }
  s.blocks.emplace_back(std::move(t));
  s.blocks.emplace_back(Paragraph{
      "single-rank wait: the wait read from the rank's own log alone (its communication region above its lowest "
      "value, median per update; \"(waiting)\": that log shows it waiting for others), against the wait column's, "
      "which compares the ranks"});
  if (shown)
    s.blocks.emplace_back(rows_left_out(x.per_rank.size(), *shown, own_work, flagged, "median own work",
                                        ", with the stragglers and the ranks that fell behind"));

  // The updates with the largest margins (where the others waited most), in step order.
  constexpr std::size_t kShown = 12;
  std::vector<std::size_t> picked(x.per_update.size());
  std::iota(picked.begin(), picked.end(), std::size_t{0});
  if (picked.size() > kShown) {
    std::stable_sort(picked.begin(), picked.end(), [&](std::size_t a, std::size_t b) {
      return x.per_update[a].margin_ms > x.per_update[b].margin_ms;
    });
    picked.resize(kShown);
    std::sort(picked.begin(), picked.end());
  }
  Table u{{"step", "slowest rank", "its own work ms", "median rank ms", "margin ms"}, {}, {}};
  for (const std::size_t i : picked) {
    const auto& p = x.per_update[i];
    u.rows.push_back({std::to_string(p.step), std::to_string(p.slowest_rank), num(p.slowest_compute_ms),
                      num(p.median_compute_ms), num(p.margin_ms)});
  }
  s.blocks.emplace_back(std::move(u));
  if (x.per_update.size() > kShown)
    s.blocks.emplace_back(Paragraph{fmt::format("the {} updates with the largest margins; {} more update{} (all are "
                                                "in --format json)",
                                                kShown, x.per_update.size() - kShown,
                                                x.per_update.size() - kShown == 1 ? "" : "s")});
}

Section waiting_section(const Report& rep) {
  Section s{"waiting", "6. Waiting and stragglers", {}};
  cross_rank_blocks(rep.cross_rank, s);
  // With every rank's log the table above carries each rank's single-rank estimate.
  if (rep.cross_rank.available) return s;
  // Each rank's log read alone. With many ranks (4,096 that could not be compared gave
  // 49,346 lines), those that wait most are shown, and the others counted.
  constexpr std::size_t kShownRanks = 8;
  std::vector<const WaitingResult*> shown;
  for (const auto& w : rep.waiting) shown.push_back(&w);
  if (shown.size() > kShownRanks) {
    auto wait_of = [](const WaitingResult* w) {
      return w->waiting && w->wait_ms ? w->wait_ms->median : !w->spike_steps.empty() ? w->spike_ms_per_update : -1.0;
    };
    std::stable_sort(shown.begin(), shown.end(),
                     [&](const WaitingResult* a, const WaitingResult* b) { return wait_of(a) > wait_of(b); });
    const auto waiting = static_cast<std::size_t>(std::count_if(
        rep.waiting.begin(), rep.waiting.end(), [](const WaitingResult& w) { return w.waiting && w.wait_ms; }));
    const auto spikes = static_cast<std::size_t>(std::count_if(
        rep.waiting.begin(), rep.waiting.end(), [](const WaitingResult& w) { return !w.waiting && !w.spike_steps.empty(); }));
    // The rank that waits least, of those with a wait estimate: the likeliest one the
    // others wait for (a review: the 8 that wait most hid it; a straggler itself shows no
    // waiting). It is shown first.
    const WaitingResult* least = nullptr;
    for (const auto& w : rep.waiting)
      if (w.wait_ms && w.rank && (!least || w.wait_ms->median < least->wait_ms->median)) least = &w;
    s.blocks.emplace_back(Paragraph{fmt::format(
        "Each of the {} ranks' logs read alone: {} wait for a slower rank throughout, {} in some updates only, {} "
        "show no sign of waiting or cannot tell.{} Shown: {} (--format json has every rank's).",
        rep.waiting.size(), waiting, spikes, rep.waiting.size() - waiting - spikes,
        least ? fmt::format(" Rank {} waits least by its communication region's time above its lowest ({} per "
                            "update, median): the likeliest one the others wait for.",
                            *least->rank, ms(least->wait_ms->median))
              : std::string(),
        least ? fmt::format("rank {}, then the {} that wait most", *least->rank, kShownRanks - 1)
        : waiting + spikes == 0 ? fmt::format("the first {} in the logs' order", kShownRanks)
                                : fmt::format("the {} that wait most", kShownRanks))});
    if (least) {
      std::erase(shown, least);
      shown.insert(shown.begin(), least);
    }
    shown.resize(kShownRanks);
  }
  for (const WaitingResult* wp : shown) {
    const auto& w = *wp;
    const std::string who = w.rank ? fmt::format("rank {}", *w.rank) : std::string("this rank");
    if (w.comm_region.empty()) {
      s.blocks.emplace_back(Paragraph{fmt::format(
          "{}: no communication region found (mark one with role=communication in the nesting, or name it "
          "with \"comm\")",
          who)});
      continue;
    }
    Fields f;
    f.items.emplace_back("rank", who);
    f.items.emplace_back("communication region", fmt::format("{} (found by {})", w.comm_region, w.comm_found_by));
    if (!w.correlation) {
      f.items.emplace_back("result", w.why_no_correlation.empty()
                                         ? std::string("too few updates or no varying compute region to compare with")
                                         : w.why_no_correlation);
      s.blocks.emplace_back(std::move(f));
      continue;
    }
    f.items.emplace_back("most anti-correlated compute",
                         fmt::format("{}: r = {:.2f} over {} updates", w.compute_region, *w.correlation, w.updates));
    f.items.emplace_back("spread (sd)", fmt::format("{} {}, {} {}, their sum {}", w.compute_region, ms(w.compute_sd_ms),
                                                    w.comm_region, ms(w.comm_sd_ms), ms(w.sum_sd_ms)));
    if (w.alone) {
      f.items.emplace_back("meaning", fmt::format("the job's world size is 1: there is no other rank to wait for, so "
                                                  "{} is {}'s own time",
                                                  w.comm_region, who));
    } else if (w.waiting) {
      f.items.emplace_back(
          "meaning",
          fmt::format("time saved in {} reappears in {}, so the update time hardly moves: {}'s update time is set by "
                      "another rank, and {} waits in {} for it",
                      w.compute_region, w.comm_region, who, who, w.comm_region));
      f.items.emplace_back(
          "estimated wait",
          fmt::format("median {}, max {} per update: {} above its lowest value in the window ({}), taken as no wait; "
                      "a lower bound",
                      ms(w.wait_ms->median), ms(w.wait_ms->max), w.comm_region, ms(w.comm_floor_ms)));
    } else {
      std::string meaning = "no sign of waiting: the two do not offset each other (needs r <= -0.5 and sd(sum) < "
                            "0.6 x the smaller sd)";
      // A wait that hardly varies (another rank slower in every update by about as
      // much) does not show this way; a communication region that takes much of the
      // update may hold one.
      for (const auto& row : rep.regions.rows)
        if (row.name == w.comm_region && row.share >= 0.3)
          meaning += fmt::format("; a wait that hardly varies does not show this way, and {} takes {} of the update "
                                 "time, which one rank's log cannot tell from slow communication: give every rank's "
                                 "log to compare",
                                 w.comm_region, pct(row.share));
      if (!w.spike_steps.empty())
        meaning += fmt::format("; but in {} ({} {}) {} took more than {} while its own work stayed "
                               "typical: it waited there (see the findings)",
                               w.spike_steps.size() == 1 ? "1 update" : fmt::format("{} updates", w.spike_steps.size()),
                               w.spike_steps.size() == 1 ? "step" : "steps", rank_numbers(w.spike_steps),
                               w.comm_region, ms(w.spike_threshold_ms));
      f.items.emplace_back("meaning", std::move(meaning));
    }
    s.blocks.emplace_back(std::move(f));
  }
  return s;
}

Section findings_section(const Report& rep) {
  Section s{"findings", "7. Findings (ranked by time at stake per update)", {}};
  if (rep.findings.empty()) {
    s.blocks.emplace_back(Paragraph{"nothing stands out"});
    return s;
  }
  NumberedList list;
  for (const auto& f : rep.findings) {
    ListItem item;
    item.title = f.ms_per_update > 0
                     ? fmt::format("[{} per update{}] {}", ms(f.ms_per_update),
                                   !f.share        ? std::string()
                                   : *f.share <= 1 ? fmt::format(", {} of the update", pct(*f.share))
                                                   // (more than the median update: a variability's p90 - median)
                                                   : fmt::format(", {:.2f}x the median update", *f.share),
                                   f.title)
                     : f.title;
    item.details.emplace_back("evidence", f.evidence);
    item.details.emplace_back("action", f.action);
    list.items.push_back(std::move(item));
  }
  s.blocks.emplace_back(std::move(list));
  return s;
}

}  // namespace

Section input_section(const Diagnostics& diag) {
  Section s{"input", "Input problems", {}};
  if (diag.total() == 0) {
    s.blocks.emplace_back(Paragraph{"none: every line was read"});
    return s;
  }
  Fields f;
  f.items.emplace_back("errors", std::to_string(diag.count(Severity::kError)));
  f.items.emplace_back("warnings", std::to_string(diag.count(Severity::kWarning)));
  f.items.emplace_back("notes", std::to_string(diag.count(Severity::kNote)));
  s.blocks.emplace_back(std::move(f));
  std::size_t shown = 0;
  for (const auto& d : diag.kept()) {
    if (shown++ == 20) {
      s.blocks.emplace_back(Paragraph{fmt::format("... and {} more (stderr shows the first 20 of each kind; --format json lists up to "
                                                  "10,000)",
                                                  diag.total() - 20)});
      break;
    }
    s.blocks.emplace_back(Paragraph{format_diagnostic(d)});
  }
  return s;
}

Document build_document(const Report& report, const Diagnostics& diag) {
  Document d;
  d.title = "stepprof report";
  d.sections.push_back(run_section(report));
  d.sections.push_back(time_section(report));
  d.sections.push_back(regions_section(report));
  d.sections.push_back(paths_section(report));
  d.sections.push_back(padding_section(report));
  d.sections.push_back(waiting_section(report));
  d.sections.push_back(findings_section(report));
  d.sections.push_back(input_section(diag));
  return d;
}

}  // namespace stepprof::detail
