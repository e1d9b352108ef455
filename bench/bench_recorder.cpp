// Recorder overhead (Google Benchmark). bench/check_recorder_overhead.py runs these with
// repetitions and checks the ratios against the baselines measured in the same process:
//   BM_RegionHostClock   <= 1.3 x BM_TwoClockReads  (a region costs little beyond its two clock reads)
//   BM_RegionCompiledOut ~=       BM_EmptyLoop      (compiled out = nothing)
#include <benchmark/benchmark.h>

#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

#include <string>
#include <vector>

namespace {

// Opens a recorder writing to /dev/null for the duration of a benchmark.
struct OpenRecorder {
  OpenRecorder() {
    stepprof::Options o;
    o.path = "/dev/null";
    o.device_timing = stepprof::DeviceTiming::kOff;
    o.run_id = "bench";
    stepprof::open(o);
  }
  ~OpenRecorder() { stepprof::close(); }
};

// Baseline: the loop alone.
void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EmptyLoop);

// Two raw reads of the clock the recorder uses (rdtsc where the TSC is invariant).
void BM_TwoClockReads(benchmark::State& state) {
  for (auto _ : state) {
    const auto a = stepprof::detail::read_clock();
    const auto b = stepprof::detail::read_clock();
    benchmark::DoNotOptimize(b - a);
  }
  state.SetLabel(std::string(stepprof::clock_name()));
}
BENCHMARK(BM_TwoClockReads);

// One region entry and exit (host clock; the calling thread has no device timing).
void BM_RegionHostClock(benchmark::State& state) {
  OpenRecorder rec;
  for (auto _ : state) {
    STEPPROF_REGION("bench_region");
  }
  state.SetLabel(std::string(stepprof::clock_name()));
}
BENCHMARK(BM_RegionHostClock);

// The same through the C ABI (id registered once; for information, no target).
void BM_RegionCAbi(benchmark::State& state) {
  OpenRecorder rec;
  stepprof_region_id id = 0;
  stepprof_region_register("bench_region_c", &id);
  for (auto _ : state) {
    stepprof_region_enter(id);
    stepprof_region_exit(id);
  }
}
BENCHMARK(BM_RegionCAbi);

// One update boundary with 20 regions (5 nested in each of 4 top-level ones) and 3
// counters: the regions' entries and exits, collecting them, serializing the record
// and writing it (to /dev/null).
void BM_EndUpdate20Regions(benchmark::State& state) {
  static constexpr const char* kNames[20] = {
      "r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09",
      "r10", "r11", "r12", "r13", "r14", "r15", "r16", "r17", "r18", "r19"};
  stepprof::RegionId ids[20];
  for (int i = 0; i < 20; ++i) ids[i] = stepprof::region_id(kNames[i]);
  OpenRecorder rec;
  std::int64_t step = 0;
  for (auto _ : state) {
    for (int top = 0; top < 4; ++top) {
      stepprof::Region outer(ids[top * 5]);
      for (int k = 1; k < 5; ++k) stepprof::Region inner(ids[top * 5 + k]);
    }
    STEPPROF_COUNT("samples", 16);
    STEPPROF_COUNT("token_slots", 49672);
    STEPPROF_COUNT("valid_tokens", 43538);
    benchmark::DoNotOptimize(stepprof::end_update(step++));
  }
}
BENCHMARK(BM_EndUpdate20Regions);

// One update boundary with N regions, named as a per-layer instrumented model names
// them ("layer.17.mlp": 8 regions in each of N / 8 layers, the layers at the top
// level), each entered and exited once: the cost per region of collecting and writing a
// large record, which should not grow with N (a deep model's boundary with 1,000
// regions costs what 50 boundaries with 20 regions cost).
void BM_EndUpdateRegions(benchmark::State& state) {
  static constexpr const char* kParts[8] = {"block", "input_norm", "attention", "qkv",
                                            "core_attention", "post_norm", "mlp", "mlp_fc2"};
  const auto n = static_cast<int>(state.range(0));
  std::vector<stepprof::RegionId> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(stepprof::region_id("layer." + std::to_string(i / 8) + "." + kParts[i % 8]));
  OpenRecorder rec;
  std::int64_t step = 0;
  for (auto _ : state) {
    for (int i = 0; i < n; i += 8) {
      stepprof::Region block(ids[static_cast<std::size_t>(i)]);
      for (int k = 1; k < 8 && i + k < n; ++k) stepprof::Region inner(ids[static_cast<std::size_t>(i + k)]);
    }
    benchmark::DoNotOptimize(stepprof::end_update(step++));
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_EndUpdateRegions)->Arg(16)->Arg(128)->Arg(1024)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
