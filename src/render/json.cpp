#include <string_view>
#include <unordered_set>

#include "json_common.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof {
namespace {

using detail::Json;
using detail::opt;
using detail::count_json;
using detail::rank_json;

Json summary(const std::optional<Summary>& s) {
  if (!s) return nullptr;
  // (The sample standard deviation of one value is undefined: null, not 0.)
  const Json stdev = s->n < 2 ? Json(nullptr) : Json(s->stdev), cv = s->n < 2 ? Json(nullptr) : Json(s->cv);
  return Json{{"n", s->n},           {"mean", s->mean},     {"stdev", stdev},      {"cv_fraction", cv},
              {"min", s->min},       {"p10", s->p10},       {"median", s->median}, {"p90", s->p90},
              {"max", s->max},       {"sum", s->sum}};
}

Json summary(const Summary& s) { return summary(std::optional<Summary>(s)); }

Json rate(const Rate& r) {
  return Json{{"per_rank_per_s", opt(r.per_rank_per_s)}, {"job_per_s", opt(r.job_per_s)},
              {"job_estimated", r.job_estimated}};
}

Json run(const RunSummary& r) {
  // Appended, not inserted: ordered_json's insert searches every key before it, which was
  // quadratic in the fields (15 s for a config of 160,000). A key given twice (the reader
  // refuses such a config) would keep its first value.
  Json config = Json::object();
  auto& fields = config.get_ref<Json::object_t&>();
  std::unordered_set<std::string_view> seen;
  for (const auto& f : r.config) {
    if (!seen.insert(f.key).second) continue;
    auto v = Json::parse(f.json, nullptr, false);
    fields.Container::emplace_back(f.key, v.is_discarded() ? Json(f.json) : std::move(v));
  }
  Json per_rank = Json::array();
  for (const auto& [rank, n] : r.updates_per_rank) per_rank.push_back({{"rank", rank_json(rank)}, {"updates", n}});
  Json differences = Json::array();
  for (const auto& d : r.config_differences) {
    Json values = Json::array();
    for (const auto& [text, ranks] : d.values) {
      auto v = text.empty() ? Json() : Json::parse(text, nullptr, false);
      values.push_back({{"value", v.is_discarded() ? Json(text) : v}, {"absent", text.empty()}, {"ranks", ranks}});
    }
    differences.push_back({{"key", d.key}, {"values", values}});
  }
  Json reopened = Json::array();
  for (const auto& [step, ranks] : r.reopened_at) reopened.push_back({{"step", step}, {"ranks", ranks}});
  return Json{{"ranks", r.ranks},
              {"missing_ranks", r.missing_ranks},
              {"world_size", opt(r.world_size)},
              {"micro_batch", opt(r.micro_batch)},
              {"accumulation", opt(r.accumulation)},
              {"global_batch", opt(r.global_batch)},
              {"global_batch_derived", r.global_batch_derived},
              {"global_batch_mismatch", opt(r.global_batch_mismatch)},
              {"data_parallel", opt(r.data_parallel)},
              {"data_parallel_problem", opt(r.data_parallel_problem)},
              {"updates", r.updates},
              {"updates_per_rank", per_rank},
              {"updates_without_rank", r.updates_without_rank},
              {"first_step", opt(r.first_step)},
              {"last_step", opt(r.last_step)},
              {"updates_outside_window", r.updates_outside_window},
              {"updates_of_other_runs", r.updates_of_other_runs},
              {"steps_without_record", r.steps_without_record},
              {"step_stride", r.step_stride},
              {"stopped_early", r.stopped_early ? Json{{"field", r.stopped_early->field},
                                                       {"value", r.stopped_early->value}}
                                                : Json(nullptr)},
              {"reopened_at", reopened},
              {"nesting_source", r.nesting_source.empty() ? Json(nullptr) : Json(r.nesting_source)},
              {"config", config},
              {"config_differences", differences},
              {"files", r.files}};
}

Json slow_updates(const std::optional<SlowUpdates>& s) {
  if (!s) return nullptr;
  Json grew = Json::array();
  for (const auto& g : s->grew)
    grew.push_back({{"region", g.region}, {"slow_ms", g.slow_ms}, {"typical_ms", g.typical_ms}});
  Json other_causes = Json::array();
  for (const auto& c : s->other_causes)
    other_causes.push_back({{"region", c.region}, {"steps", c.steps}, {"grew_ms", c.grew_ms}});
  return Json{{"threshold_ms", s->threshold_ms}, {"steps", s->steps},  {"steps_ms", s->steps_ms}, {"slow_ms", s->slow_ms},
              {"typical_ms", s->typical_ms},     {"excess_ms_per_update", s->excess_ms_per_update},
              {"grew", grew},                    {"first_chain", s->first_chain},
              {"by_own_work", s->by_own_work},   {"set_by_rank", s->set_by_rank ? Json(*s->set_by_rank) : Json()},
              {"set_by_steps", s->set_by_steps},
              {"most_own_work_grew_ms", s->most_own_work_grew_ms},
              {"median_own_work_grew_ms", s->median_own_work_grew_ms},
              {"others_own_work_grew_ms", s->others_own_work_grew_ms},
              {"own_work_typical", s->own_work_typical},
              {"left_out_rank", s->left_out_rank ? Json{{"rank", s->left_out_rank->rank},
                                                        {"slow_steps_held", s->left_out_rank->slow_steps_held},
                                                        {"grew_ms", s->left_out_rank->grew_ms}}
                                                 : Json()},
              {"other_causes", other_causes}};
}

Json gpu_busy(const std::optional<GpuBusy>& g) {
  if (!g) return nullptr;
  return Json{{"updates", g->updates},
              {"updates_total", g->updates_total},
              {"ranks", g->ranks},
              {"ranks_total", g->ranks_total},
              {"busy_ms", summary(g->busy_ms)},
              {"idle_ms", summary(g->idle_ms)},
              {"idle_fraction", summary(g->idle_fraction)},
              {"most_idle_rank", g->most_idle_rank ? Json(*g->most_idle_rank) : Json(nullptr)},
              {"most_idle_fraction", g->most_idle_rank ? Json(g->most_idle_fraction) : Json(nullptr)}};
}

// The sections with a member per rank are written a rank at a time (JsonWriter): each
// such section is a head, with a placeholder where its per-rank array goes, and a
// function that makes the array's i-th element.
Json update_time_rank(const UpdateTimeResult& t, std::size_t i) {
  const auto& [rank, s] = t.per_rank_ms[i];
  return {{"rank", rank_json(rank)}, {"wall_ms", summary(s)}};
}

Json update_time_head(const UpdateTimeResult& t, const std::optional<SlowUpdates>& slow) {
  return Json{{"update_ms", summary(t.update_ms)},
              {"slow_updates", slow_updates(slow)},
              {"per_rank", nullptr},  // (update_time_rank)
              {"throughput",
               {{"samples", rate(t.samples)},
                {"token_slots", rate(t.token_slots)},
                {"valid_tokens", rate(t.valid_tokens)},
                {"frames", rate(t.frames)},
                {"global_samples_per_s", opt(t.global_samples_per_s)},
                {"samples_per_update_counted", opt(t.samples_per_update_counted)},
                {"samples_per_update_config", opt(t.samples_per_update_config)}}},
              {"gpu_busy", gpu_busy(t.gpu_busy)}};
}

Json regions(const RegionTable& t) {
  Json rows = Json::array();
  for (const auto& r : t.rows)
    rows.push_back({{"name", r.name},
                    {"parent", r.parent.empty() ? Json(nullptr) : Json(r.parent)},
                    {"depth", r.depth},
                    {"in_hierarchy", r.in_hierarchy},
                    {"updates_present", r.updates_present},
                    {"device_ms", summary(r.device_ms)},
                    {"host_ms", summary(r.host_ms)},
                    {"calls", summary(r.calls)},
                    {"device_self_ms", summary(r.device_self_ms)},
                    {"host_self_ms", summary(r.host_self_ms)},
                    {"share_fraction", r.share},
                    {"self_share_fraction", opt(r.self_share)},
                    {"gap_ms", opt(r.gap_ms)},
                    {"gap", r.gap_ms ? Json(gap_name(r.gap)) : Json(nullptr)}});  // (unknown: not "none")
  auto children_json = [](const std::vector<std::pair<std::string, double>>& kids) {
    Json out = Json::array();
    for (const auto& [name, ms] : kids) out.push_back({{"region", name}, {"ms", ms}});
    return out;
  };
  Json violations = Json::array();
  for (const auto& v : t.violations)
    violations.push_back({{"parent", v.parent},
                          {"step", v.step},
                          {"rank", rank_json(v.rank)},
                          {"parent_ms", v.parent_ms},
                          {"children_ms", v.children_ms},
                          {"children", children_json(v.children)},
                          {"children_total", v.children_total},
                          {"clock", v.device ? "device" : "host"}});
  return Json{{"nesting_known", t.nesting_known},
              {"device_busy_union", t.device_busy_union},
              {"nesting_source", t.nesting_source.empty() ? Json(nullptr) : Json(t.nesting_source)},
              {"updates", t.updates},
              {"rows", rows},
              {"outside_regions_ms", summary(t.outside_regions_ms)},
              {"nesting_violation_count", t.violation_count},
              {"nesting_violations", violations},
              {"not_in_log", t.not_in_log},
              {"not_in_nesting", t.not_in_nesting}};
}

// Where a path's work comes from: null when the log gives none (no path counter, and
// micro-batch detail that does not name the path in every update that ran it).
Json work_from(const PathCost& p) {
  if (p.work_from_microbatches) return "microbatches";
  if (p.work_from_update) return "update_counters";
  if (p.samples_id || p.frames_id || p.microbatches_id) return "counters";
  return nullptr;
}

Json code_paths(const CodePathResult& c) {
  Json groups = Json::array();
  for (const auto& g : c.groups) {
    Json paths = Json::array();
    for (const auto& p : g.paths)
      paths.push_back({{"region", p.region},
                       {"clock", p.device ? "device" : "host"},
                       {"updates", p.updates},
                       {"total_ms", p.total_ms},
                       {"calls", count_json(p.calls)},
                       {"samples", count_json(p.samples)},
                       {"frames", count_json(p.frames)},
                       {"microbatches", count_json(p.microbatches)},
                       {"work_from", work_from(p)},
                       {"counters", {{"samples", p.samples_counter}, {"frames", p.frames_counter},
                                     {"microbatches", p.microbatches_counter}}},
                       {"ms_per_sample", opt(p.ms_per_sample)},
                       {"ms_per_frame", opt(p.ms_per_frame)},
                       {"ms_per_microbatch", opt(p.ms_per_microbatch)}});
    Json frames = Json::array();
    for (const auto& e : g.frame_counts)
      frames.push_back({{"frames", e.frames},
                        {"samples", e.samples},
                        {"updates_with", e.updates_with},
                        {"updates_with_slow", e.updates_with_slow}});
    Json costliest = Json::array();
    for (const auto& u : g.costliest)
      costliest.push_back({{"rank", opt(u.rank)}, {"step", u.step}, {"slow_ms", u.slow_ms}, {"excess_ms", u.excess_ms}});
    groups.push_back({{"group", g.group},
                      {"parent", g.parent.empty() ? Json(nullptr) : Json(g.parent)},
                      {"paths", paths},
                      {"fast", g.fast.empty() ? Json(nullptr) : Json(g.fast)},
                      {"slow", g.slow.empty() ? Json(nullptr) : Json(g.slow)},
                      {"unit", g.unit},
                      {"slow_over_fast", opt(g.slow_over_fast)},
                      {"similar_cost", g.similar_cost},
                      {"updates", g.updates},
                      {"updates_with_slow", g.updates_with_slow},
                      {"updates_fast_only", g.updates_fast_only},
                      {"slow_updates_mixed_frames", g.slow_updates_mixed_frames},
                      {"fast_only_updates_mixed_frames", g.fast_only_updates_mixed_frames},
                      {"frame_counts", frames},
                      {"frame_counts_only_with_slow", g.frame_counts_only_with_slow},
                      {"microbatch_mixing", g.microbatch_mixing ? Json{{"slow_microbatches", g.microbatch_mixing->slow},
                                                                      {"fast_microbatches", g.microbatch_mixing->fast},
                                                                      {"slow_mixed_frames", g.microbatch_mixing->slow_mixed},
                                                                      {"fast_mixed_frames", g.microbatch_mixing->fast_mixed},
                                                                      {"frame_counts_only_with_slow",
                                                                       g.microbatch_mixing->frame_counts_only_with_slow}}
                                                                : Json(nullptr)},
                      {"length_split", g.length_split ? Json{{"slow_microbatches", g.length_split->slow},
                                                             {"fast_microbatches", g.length_split->fast},
                                                             {"slow_min", g.length_split->slow_min},
                                                             {"slow_max", g.length_split->slow_max},
                                                             {"fast_min", g.length_split->fast_min},
                                                             {"fast_max", g.length_split->fast_max},
                                                             {"apart", g.length_split->apart}}
                                                      : Json(nullptr)},
                      {"saving_ms_per_update", opt(g.saving_ms_per_update)},
                      {"step_saving_at_most_ms", opt(g.step_saving_at_most_ms)},
                      {"costliest_slow_updates", costliest}});
  }
  return Json{{"nesting_known", c.nesting_known}, {"groups", groups}};
}

Json padding(const PaddingResult& p) {
  Json bound = Json::array();
  for (const auto& r : p.token_bound)
    bound.push_back({{"region", r.region}, {"correlation", r.correlation}, {"median_ms", r.median_ms}});
  Json spikes = Json::array();
  for (const auto& x : p.spikes)
    spikes.push_back({{"rank", rank_json(x.rank)},
                      {"step", x.step},
                      {"padding_fraction", x.fraction},
                      {"max_padded_length", count_json(x.padded_length)}});
  // Without token counters these figures are unknown, not 0.
  auto known = [&](double v) { return p.available ? Json(v) : Json(nullptr); };
  auto known_count = [&](double v) { return p.available ? count_json(v) : Json(nullptr); };
  Json outside_nesting = Json::array();
  for (const auto& r : p.outside_nesting)
    outside_nesting.push_back({{"region", r.region}, {"correlation", r.correlation}, {"median_ms", r.median_ms}});
  return Json{{"available", p.available},
              {"why_not", p.available ? Json(nullptr) : Json(p.why_not)},
              {"token_slots", known_count(p.token_slots)},
              {"valid_tokens", known_count(p.valid_tokens)},
              {"padding_fraction", known(p.fraction)},
              {"per_update_fraction", summary(p.per_update_fraction)},
              {"padding_slots_per_s", p.available ? opt(p.padding_slots_per_s) : Json(nullptr)},
              {"padding_slots_per_update", known(p.padding_slots_per_update)},
              {"max_padded_length", count_json(p.max_padded_length)},
              {"token_bound_regions", bound},
              {"cost_ms_per_update", opt(p.cost_ms_per_update)},
              {"cost_needs_nesting", p.cost_needs_nesting},
              {"cost_updates", p.cost_updates},
              {"min_correlation", p.min_correlation},
              {"closest_below", p.closest_below ? Json{{"region", p.closest_below->region},
                                                       {"correlation", p.closest_below->correlation},
                                                       {"median_ms", p.closest_below->median_ms}}
                                                 : Json(nullptr)},
              {"outside_nesting", outside_nesting},
              {"token_slots_cv", opt(p.token_slots_cv)},
              {"spikes", {{"threshold_fraction", opt(p.spike_threshold)},
                          {"count", p.spike_count},
                          {"updates", spikes}}}};
}

// One rank's element of the "waiting" array.
Json waiting_rank(const WaitingResult& w) {
  Json paths = Json::array();
  for (const auto& p : w.path_waits)
    paths.push_back({{"region", p.region},
                     {"updates_with", p.updates_with},
                     {"wait_with_ms", p.wait_with_ms},
                     {"updates_without", p.updates_without},
                     {"wait_without_ms", p.wait_without_ms}});
  return {{"rank", opt(w.rank)},
          {"comm_region", w.comm_region.empty() ? Json(nullptr) : Json(w.comm_region)},
          {"comm_found_by", w.comm_found_by.empty() ? Json(nullptr) : Json(w.comm_found_by)},
          {"compute_region", w.compute_region.empty() ? Json(nullptr) : Json(w.compute_region)},
          {"correlation", opt(w.correlation)},
          {"why_no_correlation", w.why_no_correlation.empty() ? Json(nullptr) : Json(w.why_no_correlation)},
          // (Computed with the correlation: without it, too few updates or no compute
          // region to compare with, they are unknown, not 0.)
          {"compute_sd_ms", w.correlation ? Json(w.compute_sd_ms) : Json(nullptr)},
          {"comm_sd_ms", w.correlation ? Json(w.comm_sd_ms) : Json(nullptr)},
          {"sum_sd_ms", w.correlation ? Json(w.sum_sd_ms) : Json(nullptr)},
          {"waiting", w.waiting},
          {"alone", w.alone},
          {"comm_floor_ms", w.wait_ms ? Json(w.comm_floor_ms) : Json(nullptr)},
          {"wait_ms", summary(w.wait_ms)},
          {"path_waits", paths},
          {"spikes", w.spike_steps.empty() ? Json(nullptr)
                                           : Json{{"steps", w.spike_steps},
                                                  {"threshold_ms", w.spike_threshold_ms},
                                                  {"excess_ms", w.spike_excess_ms},
                                                  {"ms_per_update", w.spike_ms_per_update}}},
          {"updates", w.updates}};
}

// A pipeline stage's value (JSON text, as in config_differences), or null for none.
Json stage_value(const std::string& text) {
  if (text.empty()) return nullptr;
  auto v = Json::parse(text, nullptr, false);
  return v.is_discarded() ? Json(text) : v;
}

Json cross_rank_rank(const CrossRankResult& x, std::size_t i) {
  const auto& r = x.per_rank[i];
  Json lags = Json::array();
  for (const auto& l : r.lag.regions)
    lags.push_back({{"region", l.region},
                    {"rank_ms", l.rank_ms},
                    {"others_ms", l.others_ms},
                    {"outside_children_ms", l.outside_children_ms},
                    {"leaf", l.leaf}});
  return {{"rank", r.rank},
          {"compute_ms", summary(r.compute_ms)},
          {"wait_ms", summary(r.wait_ms)},
          {"comm_ms", summary(r.comm_ms)},
          {"relative_score", r.relative_score},
          {"individual_score", r.individual_score},
          {"times_slowest", r.times_slowest},
          {"straggler", r.straggler},
          {"single_rank_wait_median_ms", opt(r.single_rank_wait_median_ms)},
          {"single_rank_waiting", r.single_rank_waiting},
          {"samples_per_update", opt(r.samples_per_update)},
          {"lag_regions", lags},
          {"lag_proportional", r.lag.proportional}};
}

Json cross_rank_head(const CrossRankResult& x) {
  Json per_update = Json::array();
  for (const auto& u : x.per_update)
    per_update.push_back({{"step", u.step},
                          {"slowest_rank", u.slowest_rank},
                          {"slowest_compute_ms", u.slowest_compute_ms},
                          {"median_compute_ms", u.median_compute_ms},
                          {"margin_ms", u.margin_ms},
                          {"update_ms", u.update_ms}});
  Json recurring = Json::array();
  for (const auto& g : x.recurring)
    recurring.push_back({{"rank", g.rank},
                         {"behind", g.behind},
                         {"updates", g.updates},
                         {"margin_ms", g.margin_ms},
                         {"threshold_ms", g.threshold_ms},
                         {"at_stake_ms", g.at_stake_ms},
                         {"others_behind", g.others_behind},
                         {"others_compared", g.others_compared},
                         {"every", opt(g.every)},
                         {"steps", g.steps},
                         {"paths_scaled", g.paths_scaled},
                         {"stage", stage_value(g.stage)}});
  Json episodes = Json::array();
  for (const auto& e : x.episodes)
    episodes.push_back({{"rank", e.rank},
                        {"first_step", e.first_step},
                        {"last_step", e.last_step},
                        {"updates", e.updates},
                        {"behind", e.behind},
                        {"margin_ms", e.margin_ms},
                        {"typical_margin_ms", e.typical_margin_ms},
                        {"threshold_ms", e.threshold_ms},
                        {"long_stretch", e.long_stretch},
                        {"running_quartile", e.running_quartile},
                        {"paths_scaled", e.paths_scaled},
                        {"excess_ms", e.excess_ms},
                        {"shared", e.shared},
                        {"alongside", e.alongside},
                        {"among_ranks", e.among_ranks > 0 ? Json(e.among_ranks) : Json(nullptr)},
                        {"steps_not_compared", e.steps_not_compared},
                        {"stage", stage_value(e.stage)}});
  Json slow_group = nullptr;
  if (const auto& g = x.slow_group)
    slow_group = {{"slow_ranks", g->slow},  {"fast_ranks", g->fast},     {"slow_ms", g->slow_ms},
                  {"fast_ms", g->fast_ms},   {"split_on", g->split_on}, {"gap_ms", g->gap_ms},       {"spread_ms", g->spread_ms}, {"slow_spread_ms", g->slow_spread_ms},
                  {"at_stake_ms", g->at_stake_ms}, {"updates", g->updates}, {"updates_apart", g->updates_apart},
                  {"updates_slowest", g->updates_slowest}, {"lead_t", opt(g->lead_t)}};
  Json group_stretches = Json::array();
  for (const auto& g : x.group_stretches)
    group_stretches.push_back({{"ranks", g.ranks},
                               {"key", g.key},
                               {"value", g.value},
                               {"first_step", g.first_step},
                               {"last_step", g.last_step},
                               {"updates", g.updates},
                               {"factor", g.factor},
                               {"others_factor", g.others_factor},
                               {"excess_ms", g.excess_ms},
                               {"at_stake_ms", g.at_stake_ms}});
  // Runs of steps (StepRun) and the ranks named with them, under `ranks_key`.
  auto runs = [](const std::vector<StepRun>& examples, const char* ranks_key) {
    Json out = Json::array();
    for (const auto& r : examples)
      out.push_back({{"step", r.first_step}, {"last_step", r.last_step}, {"steps", r.steps}, {ranks_key, r.ranks}});
    return out;
  };
  const Json without_comm = runs(x.without_comm_examples, "ranks");
  const Json zero_wall = runs(x.bad_wall_examples, "ranks");
  const Json incomplete = runs(x.incomplete_examples, "ranks_missing");
  Json ended_early = Json::array();
  for (const auto& e : x.ended_early)
    ended_early.push_back({{"rank", e.rank}, {"last_step", e.last_step}, {"next_step", e.next_step}});
  Json stage_own = Json::array();
  for (const auto& [stage, own_ms] : x.stage_own_ms) stage_own.push_back({{"stage", stage_value(stage)}, {"own_ms", own_ms}});
  Json stage_slow = Json::array();
  for (const auto& r : x.stage_slow)
    stage_slow.push_back({{"rank", r.rank}, {"stage", stage_value(r.stage)}, {"own_ms", r.own_ms},
                          {"peers_ms", r.peers_ms}, {"ahead", r.ahead}});
  Json short_ranks = Json::array();
  for (const auto& [rank, steps] : x.ranks_short) short_ranks.push_back({{"rank", rank}, {"steps", steps}});
  return Json{{"available", x.available},
              {"why_not", x.why_not.empty() ? Json(nullptr) : Json(x.why_not)},
              {"comm_region", x.comm_region.empty() ? Json(nullptr) : Json(x.comm_region)},
              {"comm_found_by", x.comm_found_by.empty() ? Json(nullptr) : Json(x.comm_found_by)},
              {"threshold", x.threshold},
              {"ranks", x.ranks},
              {"steps_aligned", x.steps_aligned},
              {"steps_after_end", x.steps_after_end},
              {"steps_incomplete", x.steps_incomplete},
              {"steps_without_comm_region", x.steps_without_comm},
              {"without_comm_region_examples", without_comm},
              {"steps_bad_wall", x.steps_bad_wall},
              {"bad_wall_examples", zero_wall},
              {"incomplete_examples", incomplete},
              {"ranks_missing", x.ranks_missing},
              {"ranks_without_comm_region", x.ranks_without_comm},
              {"ranks_short", short_ranks},
              {"ended_early", ended_early},
              {"steps_total", x.steps_total},
              {"stragglers", x.stragglers},
              {"margin_ms", summary(x.margin_ms)},
              {"episodes", episodes},
              {"recurring", recurring},
              {"episode_threshold_ms", x.available ? Json(x.episode_threshold_ms) : Json(nullptr)},
              {"slow_group", slow_group},
              {"group_stretches", group_stretches},
              {"stage_field", x.stage_field.empty() ? Json(nullptr) : Json(x.stage_field)},
              {"stages_compared", x.stages_compared},
              {"stage_own_ms", stage_own},
              {"stage_slow", stage_slow},
              {"stage_slow_at_stake_ms", x.stage_slow_at_stake_ms},
              {"window_skew", x.window_skew ? Json{{"steps", x.window_skew->steps},
                                                   {"start_spread_ms", x.window_skew->start_spread_ms},
                                                   {"end_spread_ms", x.window_skew->end_spread_ms},
                                                   {"last_rank", x.window_skew->last_rank},
                                                   {"times_last", x.window_skew->times_last},
                                                   {"first_rank", x.window_skew->first_rank}}
                                            : Json(nullptr)},
              {"per_rank", nullptr},  // (cross_rank_rank)
              {"per_update", per_update}};
}

Json findings(const std::vector<Finding>& fs) {
  Json out = Json::array();
  for (const auto& f : fs)
    out.push_back({{"kind", f.kind},
                   {"subject", f.subject.empty() ? Json(nullptr) : Json(f.subject)},
                   {"ms_per_update", f.ms_per_update},
                   {"share_fraction", opt(f.share)},
                   {"title", f.title},
                   {"evidence", f.evidence},
                   {"action", f.action}});
  return out;
}

}  // namespace

bool render_json(const Report& r, const Diagnostics& diag, const std::function<bool(std::string_view)>& write) {
  detail::JsonWriter w(write);
  w.begin_object();
  w.member("schema", "stepprof.report/1");
  w.member("analyzed", true);
  w.member("run", run(r.run));
  w.key("update_time");
  w.object_with_array(update_time_head(r.time, r.slow_updates), "per_rank", r.time.per_rank_ms.size(),
                      [&](std::size_t i) { return update_time_rank(r.time, i); });
  w.member("regions", regions(r.regions));
  w.member("code_paths", code_paths(r.paths));
  w.member("padding", padding(r.padding));
  w.key("waiting");
  w.begin_array();
  for (const auto& x : r.waiting) {
    if (!w.ok()) return false;  // (a write failed: the rest is not made)
    w.value(waiting_rank(x));
  }
  w.end_array();
  w.key("cross_rank");
  w.object_with_array(cross_rank_head(r.cross_rank), "per_rank", r.cross_rank.per_rank.size(),
                      [&](std::size_t i) { return cross_rank_rank(r.cross_rank, i); });
  w.member("findings", findings(r.findings));
  w.member("diagnostics", detail::diagnostics_json(diag));
  w.end_object();
  return w.finish();
}

std::string render_json(const Report& r, const Diagnostics& diag) {
  std::string text;
  render_json(r, diag, [&](std::string_view piece) {
    text += piece;
    return true;
  });
  return text;
}

std::string render_json_unanalyzed(const Diagnostics& diag) {
  return detail::dump_json(detail::unanalyzed_json("stepprof.report/1", diag));
}

}  // namespace stepprof
