#include "stepprof/analysis/run_summary.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "stepprof/schema.hpp"

namespace stepprof {

namespace {

// A positive integer config field, the first of `keys` present, and its key.
std::optional<std::pair<std::int64_t, std::string_view>> size_field(const RunConfig& cfg,
                                                                    std::initializer_list<std::string_view> keys) {
  for (const std::string_view key : keys) {
    const RawField* f = cfg.find(key);
    if (!f) continue;
    std::int64_t v = 0;
    const char* end = f->json.data() + f->json.size();
    const auto [at, ec] = std::from_chars(f->json.data(), end, v);
    if (ec == std::errc() && at == end && v > 0) return std::pair{v, key};
  }
  return std::nullopt;
}

// RunSummary::data_parallel from the config's sizes, each at most kMaxWorldSize; sizes
// that do not fit world_size are not used, and data_parallel_problem says why.
void data_parallel_size(const RunConfig& cfg, RunSummary& s) {
  const auto dp = size_field(cfg, {"data_parallel_size", "data_parallel", "dp_size", "dp_degree"});
  std::int64_t model = 1;
  bool any_model = false;  // (a size of 1 given counts: tp 1 x pp 1 x dp 3 is no world of 12)
  std::string sizes;
  for (const auto& keys : {std::initializer_list<std::string_view>{"tensor_parallel_size", "tensor_model_parallel_size",
                                                                   "tensor_parallel", "tp_size", "tp_degree"},
                           std::initializer_list<std::string_view>{"pipeline_parallel_size",
                                                                   "pipeline_model_parallel_size", "pipeline_parallel",
                                                                   "pp_size", "pp_degree"},
                           std::initializer_list<std::string_view>{"context_parallel_size", "context_parallel",
                                                                   "cp_size"}})
    if (const auto f = size_field(cfg, keys)) {
      if (f->first > kMaxWorldSize) {
        s.data_parallel_problem = fmt::format("{} {} is above 2^20 ranks: not used", f->second, f->first);
        return;
      }
      model *= f->first;  // (three sizes of at most 2^20: no overflow)
      any_model = true;
      sizes += fmt::format(" / {} {}", f->second, f->first);
    }
  if (!dp && model == 1) return;
  if (dp && dp->first > kMaxWorldSize) {
    s.data_parallel_problem = fmt::format("{} {} is above 2^20 ranks: not used", dp->second, dp->first);
    return;
  }
  if (!s.world_size) {
    if (dp) s.data_parallel = dp->first, s.data_parallel_from = fmt::format("the config's {}", dp->second);
    return;
  }
  const std::int64_t world = *s.world_size;
  if (dp) {
    if (dp->first > world || world % dp->first != 0 || (any_model && dp->first * model != world)) {
      s.data_parallel_problem =
          any_model ? fmt::format("{} {} x the model-parallel sizes ({}) is not world_size {}: not used", dp->second,
                                  dp->first, sizes.substr(3), world)
                    : fmt::format("{} {} does not divide world_size {}: not used", dp->second, dp->first, world);
      return;
    }
    s.data_parallel = dp->first;
    s.data_parallel_from = fmt::format("the config's {}", dp->second);
    return;
  }
  if (world % model != 0) {
    s.data_parallel_problem =
        fmt::format("the model-parallel sizes ({}) do not divide world_size {}: not used", sizes.substr(3), world);
    return;
  }
  s.data_parallel = world / model;
  s.data_parallel_from = fmt::format("world_size {}{}", world, sizes);
}

}  // namespace

RunSummary summarize_run(const AnalysisInput& in) {
  RunSummary s;
  s.files = in.data.files;
  s.updates_outside_window = in.data.updates_outside_window;
  s.updates_before_window = in.data.updates_before_window;
  s.updates_of_other_runs = in.data.updates_of_other_runs;
  if (in.hierarchy) s.nesting_source = in.hierarchy->source;
  const RunConfig* cfg = nullptr;
  std::vector<std::pair<std::int64_t, std::int64_t>> after_config;  // (step, rank) of first updates after a config
  for (const auto& r : in.data.ranks) {
    // (A rank with a config but no update record kept is not one with records: missing.)
    if (r.rank && !r.updates.empty()) s.ranks.push_back(*r.rank);
    else if (!r.rank) s.updates_without_rank += r.updates.size();
    s.updates += r.updates.size();
    // (Of the ranks with update records: one without is a missing rank, not "2: 0".)
    if (!r.updates.empty()) s.updates_per_rank.emplace_back(r.rank.value_or(-1), r.updates.size());
    // (The rank's first open: the first update after the first config record in the file
    // that holds its lowest step. When a step below it follows (a step counter that went
    // back: the steps-backwards warning says so) it is not "opened again"; when it is the
    // rank's lowest step it is kept, as before: a rank that started late.)
    const auto lowest = std::min_element(r.updates.begin(), r.updates.end(),
                                         [](const UpdateRecord& a, const UpdateRecord& b) { return a.step < b.step; });
    for (const auto& u : r.updates) {
      s.first_step = std::min(s.first_step.value_or(u.step), u.step);
      s.last_step = std::max(s.last_step.value_or(u.step), u.step);
      if (u.source.after_config &&
          !(u.source.after_first_config && u.source.file == lowest->source.file && u.step != lowest->step))
        after_config.emplace_back(u.step, r.rank.value_or(-1));  // (-1: no rank)
    }
    if (!cfg && r.config) cfg = &*r.config;
  }
  // The recorder opened again (the window's first step is every log's first update).
  std::sort(after_config.begin(), after_config.end());
  for (const auto& [step, rank] : after_config) {
    if (step == s.first_step) continue;
    if (s.reopened_at.empty() || s.reopened_at.back().first != step) s.reopened_at.push_back({step, {}});
    s.reopened_at.back().second.push_back(rank);
  }
  // A job that logs every k-th update: the steps' common stride.
  if (s.first_step) {
    std::uint64_t g = 0;
    std::set<std::int64_t> distinct;
    for (const auto& r : in.data.ranks)
      for (const auto& u : r.updates) {
        g = std::gcd(g, static_cast<std::uint64_t>(u.step - *s.first_step));
        if (distinct.size() < 3) distinct.insert(u.step);
      }
    if (distinct.size() >= 3 && g > 1) s.step_stride = static_cast<std::int64_t>(g);
  }
  // (A rank's log holds each step once: the reader keeps the first of a step given twice.
  // Steps are >= 0, so a rank's count is below 2^63; the sum over ranks saturates.)
  if (s.first_step)
    for (const auto& r : in.data.ranks)
      if (!r.updates.empty()) {
        const std::uint64_t missing =
            static_cast<std::uint64_t>((*s.last_step - *s.first_step) / s.step_stride) + 1 - r.updates.size();
        s.steps_without_record = missing > std::numeric_limits<std::uint64_t>::max() - s.steps_without_record
                                     ? std::numeric_limits<std::uint64_t>::max()
                                     : s.steps_without_record + missing;
      }
  // Every rank's log ends before the end the config planned (and --steps cut nothing
  // after the window: `--steps 15:` cuts only steps before it, and hid the stop).
  // (Steps are >= 0 and the config's values are int64: the differences cannot overflow
  // unless they are negative, which fails the tests.)
  if (cfg && s.last_step && s.updates_outside_window == s.updates_before_window) {
    if (cfg->last_step && *cfg->last_step >= 0 && *cfg->last_step - *s.last_step >= s.step_stride)
      s.stopped_early = StoppedEarly{std::string(schema::kLastStep), *cfg->last_step};
    else if (!cfg->last_step && cfg->max_steps && *cfg->max_steps >= 0 &&
             *cfg->max_steps - *s.last_step > s.step_stride)
      s.stopped_early = StoppedEarly{std::string(schema::kMaxSteps), *cfg->max_steps};
  }
  // Fields that differ between ranks: every value and its ranks. Values are compared in
  // canonical form (whitespace and key order written differently are one value) and
  // shown as the first rank with it wrote it.
  // (Hashed: looking each key up in each rank's field list was quadratic in the fields,
  // 41 s for a config of 160,000 fields.)
  {
    std::vector<std::string_view> keys;
    std::unordered_set<std::string_view> seen;
    std::vector<const RankLog*> with;
    std::vector<std::unordered_map<std::string_view, const RawField*>> fields_of;  // of each rank in `with`
    for (const auto& r : in.data.ranks)
      if (r.rank && r.config && !r.updates.empty()) {  // (the ranks analyzed)
        with.push_back(&r);
        auto& by_key = fields_of.emplace_back();
        for (const auto& f : r.config->fields) {
          by_key.try_emplace(f.key, &f);  // (the first of a key, as RunConfig::find)
          if (f.key != "rank" && seen.insert(f.key).second) keys.push_back(f.key);
        }
      }
    for (const auto& key : keys) {
      ConfigDifference d{std::string(key), {}};
      std::unordered_map<std::string, std::size_t> value_of;  // canonical form -> element of d.values
      for (std::size_t i = 0; i < with.size(); ++i) {
        const RankLog* r = with[i];
        const auto found = fields_of[i].find(key);
        const RawField* f = found == fields_of[i].end() ? nullptr : found->second;
        const std::string value = f ? f->json : std::string();
        const auto [it, fresh] = value_of.try_emplace(f ? canonical_json(value) : std::string(), d.values.size());
        if (fresh) d.values.push_back({value, {}});
        d.values[it->second].second.push_back(*r->rank);
      }
      if (d.values.size() > 1) s.config_differences.push_back(std::move(d));
    }
  }
  if (cfg) {
    s.config = cfg->fields;
    s.world_size = cfg->world_size;
    s.micro_batch = cfg->micro_batch;
    s.accumulation = cfg->accumulation;
    s.global_batch = cfg->global_batch;
  }
  if (cfg) data_parallel_size(*cfg, s);
  const std::optional<std::int64_t> replicas = s.data_parallel ? s.data_parallel : s.world_size;
  std::int64_t product = 0;
  if (s.micro_batch && s.accumulation && replicas &&
      !__builtin_mul_overflow(*s.micro_batch, *s.accumulation, &product) &&
      !__builtin_mul_overflow(product, *replicas, &product)) {
    const std::string of = s.data_parallel ? fmt::format("data-parallel size ({})", s.data_parallel_from)
                                           : std::string("world_size");
    if (!s.global_batch) {
      s.global_batch = product;
      s.global_batch_derived = true;
    } else if (*s.global_batch != product) {
      s.global_batch_mismatch = fmt::format(
          "config says global_batch {} but micro_batch x accumulation x {} = {} x {} x {} = {}; the job's samples/s "
          "use global_batch {}{}",
          *s.global_batch, of, *s.micro_batch, *s.accumulation, *replicas, product, *s.global_batch,
          s.data_parallel            ? std::string()
          : s.data_parallel_problem ? fmt::format(" (the config's parallel sizes: {})", *s.data_parallel_problem)
                                     : std::string(" (with tensor or pipeline parallelism the world size counts ranks "
                                                   "that share a batch, and the global batch is micro-batch x "
                                                   "accumulation x data-parallel size: give `data_parallel_size`, or "
                                                   "`tensor_parallel_size` and `pipeline_parallel_size`, in the "
                                                   "config)"));
    }
  }
  if (s.world_size) {
    for (std::int64_t r = 0; r < *s.world_size; ++r)
      if (std::find(s.ranks.begin(), s.ranks.end(), r) == s.ranks.end()) s.missing_ranks.push_back(r);
  }
  return s;
}

}  // namespace stepprof
