// Recorder overhead (Google Benchmark). bench/check_recorder_overhead.py runs these with
// repetitions and checks the ratios against the baselines measured in the same process:
//   BM_RegionHostClock   <= 1.3 x BM_TwoClockReads  (a region costs little beyond its two clock reads)
//   BM_RegionCompiledOut ~=       BM_EmptyLoop      (compiled out = nothing)
#include <benchmark/benchmark.h>

#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

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

}  // namespace

BENCHMARK_MAIN();
