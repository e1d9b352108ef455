#include "stepprof/analysis/update_time.hpp"

#include <cmath>
#include <map>

#include "stepprof/analysis/stats.hpp"
#include "stepprof/schema.hpp"

namespace stepprof {
namespace {

// Rate of one counter: per rank sum(count)/sum(wall s), averaged over ranks; job =
// sum over ranks when all ranks are present, else the per-rank rate x world size.
// `token_pair` (token_slots and valid_tokens): updates whose two token counters contradict
// each other (one without the other, more valid tokens than slots: the reader's bad-field
// error) are left out, count and wall time, as the padding figures leave them out; else
// token slots/s came out below valid tokens/s.
Rate rate(const AnalysisInput& in, const RunSummary& run, std::optional<NameTable::Id> counter,
          std::optional<double> fallback_per_update, bool token_pair = false) {
  namespace c = schema::counter;
  const auto slots_id = in.counter(c::kTokenSlots), valid_id = in.counter(c::kValidTokens);
  token_pair = token_pair && slots_id && valid_id;
  Rate r;
  double sum_rates = 0;
  std::size_t ranks = 0;
  for (const auto& log : in.data.ranks) {
    double count = 0, wall_ms = 0;
    bool any = false;
    const std::size_t first = in.first_update_of(log).value_or(0);
    for (std::size_t i = 0; i < log.updates.size(); ++i) {
      const UpdateRecord& u = log.updates[i];
      if (token_pair && c::token_counters_contradict(in.counter_of(first + i, u, *slots_id),
                                                     in.counter_of(first + i, u, *valid_id)))
        continue;
      wall_ms += u.wall_ms;
      // An absent counter means no such work in that update (0), unless the config
      // gives the amount per update (samples = micro_batch x accumulation).
      std::optional<double> v;
      if (counter) v = in.counter_of(first + i, u, *counter);
      if (!v) v = fallback_per_update;
      if (v) {
        count += *v;
        any = true;
      }
    }
    if (!any || wall_ms <= 0) continue;
    sum_rates += count / wall_ms * 1000.0;
    ++ranks;
  }
  // (A rate beyond a double, from wall times of 5e-324 ms, is left unknown: the text said
  // "inf" where the JSON said null.)
  if (ranks == 0 || !std::isfinite(sum_rates)) return r;
  r.per_rank_per_s = sum_rates / static_cast<double>(ranks);
  if (run.world_size && run.missing_ranks.empty() && static_cast<std::int64_t>(ranks) == *run.world_size) {
    r.job_per_s = sum_rates;
  } else if (run.world_size) {
    if (const double job = *r.per_rank_per_s * static_cast<double>(*run.world_size); std::isfinite(job)) {
      r.job_per_s = job;
      r.job_estimated = true;
    }
  } else if (ranks == in.data.ranks.size() && ranks > 1) {
    r.job_per_s = sum_rates;  // world size unknown: the ranks given are the job
    r.job_estimated = true;
  }
  return r;
}

}  // namespace

UpdateTimeResult analyze_update_time(const AnalysisInput& in, const RunSummary& run) {
  UpdateTimeResult out;
  std::map<std::int64_t, double> job_ms;  // step -> max wall over ranks
  for (const auto& log : in.data.ranks) {
    std::vector<double> walls;
    for (const auto& u : log.updates) {
      walls.push_back(u.wall_ms);
      auto [it, inserted] = job_ms.try_emplace(u.step, u.wall_ms);
      if (!inserted) it->second = std::max(it->second, u.wall_ms);
    }
    if (in.data.ranks.size() > 1)
      if (auto s = summarize(walls)) out.per_rank_ms.emplace_back(log.rank.value_or(-1), *s);
  }
  std::vector<double> job;
  double job_total_ms = 0;
  double longest = 0;
  for (const auto& [step, ms] : job_ms) {
    job.push_back(ms);
    job_total_ms += ms;
    if (!out.slowest_step || ms > longest) {
      if (out.slowest_step) out.next_slowest_ms = longest;
      out.slowest_step = step;
      longest = ms;
    } else if (!out.next_slowest_ms || ms > *out.next_slowest_ms) {
      out.next_slowest_ms = ms;
    }
  }
  out.update_ms = summarize(job);

  std::optional<double> samples_per_update;
  if (run.micro_batch && run.accumulation) samples_per_update = static_cast<double>(*run.micro_batch * *run.accumulation);
  namespace c = schema::counter;
  out.samples = rate(in, run, in.counter(c::kSamples), samples_per_update);
  out.token_slots = rate(in, run, in.counter(c::kTokenSlots), std::nullopt, true);
  out.valid_tokens = rate(in, run, in.counter(c::kValidTokens), std::nullopt, true);
  out.frames = rate(in, run, in.counter(c::kFrames), std::nullopt);
  if (const auto id = in.counter(c::kSamples); id && samples_per_update) {
    std::vector<double> counted;
    const auto updates = in.updates();
    for (std::size_t k = 0; k < updates.size(); ++k)
      if (const auto v = in.counter_of(k, *updates[k], *id)) counted.push_back(*v);
    // (Half a percent: a last micro-batch cut short leaves the median where it was.)
    if (const auto m = median(counted); m && std::fabs(*m - *samples_per_update) > 0.005 * *samples_per_update) {
      out.samples_per_update_counted = *m;
      out.samples_per_update_config = *samples_per_update;
    }
  }
  out.gpu_busy = analyze_gpu_busy(in);
  if (run.global_batch && job_total_ms > 0 &&
      std::isfinite(static_cast<double>(*run.global_batch) * static_cast<double>(job.size()) / job_total_ms * 1000.0))
    out.global_samples_per_s = static_cast<double>(*run.global_batch) * static_cast<double>(job.size()) /
                               job_total_ms * 1000.0;
  return out;
}

}  // namespace stepprof
