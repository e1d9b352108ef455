// What-if replay speed (docs/whatif.md "Speed"): samples per second through
// WhatIfReplay::replay, the loop behind `stepprof whatif` (and each of its bootstrap
// replicates), on a generated job shaped like the reference workload: 8 ranks x 2,000
// updates x 2 micro-batches of 8 samples (256,000 samples), frames 1..9 per sample, two
// alternative geometry paths. Target: >= 1 million samples per second
// (bench/check_whatif_replay.py, CTest bench_whatif_replay).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "stepprof/analysis/cost_model.hpp"
#include "stepprof/analysis/whatif.hpp"

namespace {

using namespace stepprof;

struct Job {
  Dataset data;
  Hierarchy nesting;
  CostModelSet models;
};

// detail: per-micro-batch detail in every update (else only the frame histogram).
Job make_job(bool detail) {
  Job j;
  Dataset& d = j.data;
  d.files = {"generated"};
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> frame(1, 8), text(24, 96);
  std::bernoulli_distribution nine(0.8), noise_sign(0.5);
  const auto fast = d.regions.intern("vggt_batched"), slow = d.regions.intern("vggt_single"),
             lang = d.regions.intern("language_forward"), geo = d.regions.intern("geometry_total");
  auto c = [&](const char* n) { return d.counters.intern(n); };
  for (int r = 0; r < 8; ++r) {
    RankLog& log = d.ranks.emplace_back();
    log.rank = r;
    RunConfig cfg;
    cfg.rank = r;
    cfg.world_size = 8;
    log.config = cfg;
    for (int step = 1; step <= 2000; ++step) {
      UpdateRecord& u = log.updates.emplace_back();
      u.rank = r;
      u.step = step;
      double ff = 0, sf = 0, fs = 0, ss = 0, fm = 0, sm = 0, slots = 0, valid = 0, frames = 0;
      std::map<std::int64_t, std::int64_t> hist;
      for (int m = 0; m < 2; ++m) {
        MicroBatch mb;
        std::int64_t longest = 0;
        for (int s = 0; s < 8; ++s) {
          const std::int64_t f = nine(rng) ? 9 : frame(rng);
          const std::int64_t t = 4 * f + text(rng);
          mb.frames.push_back(f);
          mb.tokens.push_back(t);
          longest = std::max(longest, t);
          ++hist[f];
          frames += static_cast<double>(f);
          valid += static_cast<double>(t);
        }
        const bool same = std::all_of(mb.frames.begin(), mb.frames.end(), [&](auto f) { return f == mb.frames[0]; });
        const double mf = std::accumulate(mb.frames.begin(), mb.frames.end(), 0.0);
        (same ? ff : sf) += mf;
        (same ? fs : ss) += 8;
        (same ? fm : sm) += 1;
        slots += 8.0 * static_cast<double>(longest);
        mb.path = same ? fast : slow;
        if (detail) u.microbatches.push_back(std::move(mb));
      }
      const double jitter = 1 + (noise_sign(rng) ? 0.02 : -0.02);
      const double tf = 25 * ff * jitter, ts = 46 * sf * jitter, tl = 0.055 * slots * jitter;
      if (fm > 0) u.regions.push_back({fast, geo, std::nullopt, tf, static_cast<std::int64_t>(fm)});
      if (sm > 0) u.regions.push_back({slow, geo, std::nullopt, ts, static_cast<std::int64_t>(ss)});
      u.regions.push_back({geo, kTopLevel, std::nullopt, tf + ts, 2});
      u.regions.push_back({lang, kTopLevel, std::nullopt, tl, 2});
      u.wall_ms = tf + ts + tl + 100;
      u.counters = {{c("samples"), 16},          {c("frames"), frames},         {c("token_slots"), slots},
                    {c("valid_tokens"), valid},  {c("micro_steps"), 2},         {c("vggt_batched_samples"), fs},
                    {c("vggt_batched_frames"), ff}, {c("vggt_batched_microbatches"), fm},
                    {c("vggt_single_samples"), ss}, {c("vggt_single_frames"), sf}, {c("vggt_single_microbatches"), sm}};
      for (const auto& [f, n] : hist) u.frame_histogram.emplace_back(f, n);
      u.input_shapes.push_back({{8, 0}, 2});
    }
  }
  HierarchyNode g{"geometry_total", "", "", RegionRole::kNone, "", "", "", 0};
  j.nesting.add(g);
  j.nesting.add({"vggt_batched", "geometry_total", "geometry", RegionRole::kNone, "", "", "", 0});
  j.nesting.add({"vggt_single", "geometry_total", "geometry", RegionRole::kNone, "", "", "", 0});
  j.nesting.add({"language_forward", "", "", RegionRole::kNone, "", "", "", 0});
  j.models = fit_cost_models(AnalysisInput{j.data, &j.nesting});
  return j;
}

void replay(benchmark::State& state, bool detail, const char* variant) {
  static Job with_detail = make_job(true);
  static Job histogram_only = make_job(false);
  const Job& j = detail ? with_detail : histogram_only;
  const AnalysisInput in{j.data, &j.nesting};
  WhatIfReplay r(in, j.models, WhatIfOptions{}, variant);
  if (!r.available()) {
    state.SkipWithError(r.why_not().c_str());
    return;
  }
  std::vector<double> change;
  std::uint64_t seed = 0;
  std::size_t samples = 0;
  for (auto _ : state) {
    samples += r.replay(++seed, change);
    benchmark::DoNotOptimize(change.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(samples));
  state.counters["samples_per_replay"] = static_cast<double>(samples) / static_cast<double>(state.iterations());
}

void BM_WhatIfReplayGroup(benchmark::State& s) { replay(s, true, "group"); }
void BM_WhatIfReplayPad(benchmark::State& s) { replay(s, true, "pad"); }
void BM_WhatIfReplayPadFromHistograms(benchmark::State& s) { replay(s, false, "pad"); }

}  // namespace

BENCHMARK(BM_WhatIfReplayGroup)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WhatIfReplayPad)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WhatIfReplayPadFromHistograms)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
