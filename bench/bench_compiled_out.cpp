// BM_RegionCompiledOut: the body of BM_RegionHostClock in a translation unit built with
// STEPPROF_DISABLE (bench/CMakeLists.txt); compare with BM_EmptyLoop.
#ifndef STEPPROF_DISABLE
#error "this file must be compiled with STEPPROF_DISABLE defined"
#endif
#include <benchmark/benchmark.h>

#include "stepprof/stepprof.hpp"

namespace {

void BM_RegionCompiledOut(benchmark::State& state) {
  for (auto _ : state) {
    STEPPROF_REGION("bench_region");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_RegionCompiledOut);

}  // namespace
