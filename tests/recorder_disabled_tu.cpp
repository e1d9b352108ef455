// Built with STEPPROF_DISABLE (tests/CMakeLists.txt): every macro must compile to nothing.
#ifndef STEPPROF_DISABLE
#error "this file must be compiled with STEPPROF_DISABLE defined"
#endif
#include <cstdint>
#include <string_view>
#include <vector>

#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

#define STEPPROF_TEST_STR(...) #__VA_ARGS__
#define STEPPROF_TEST_XSTR(...) STEPPROF_TEST_STR(__VA_ARGS__)

// The region macro's expansion, as text: two declarations of constants (its name checked
// as a constant string, as with recording on), no Region. The others name their arguments
// only inside sizeof (compile-time: no call into the recorder can remain).
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_REGION("x"))).starts_with("[[maybe_unused]] static constexpr bool"));
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_REGION("x"))).find("Region") == std::string_view::npos);
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_COUNT("x", 1))).starts_with("static_cast<void>(sizeof("));
static_assert(!stepprof::kEnabled);
// Those that return a Status when compiled in give kOk, at compile time: `auto s =
// STEPPROF_END_UPDATE(0);` and `if (STEPPROF_PADDING_FRACTION(f) != kOk)` compile as with
// the recorder (they expanded to nothing, and such code did not compile).
static_assert(STEPPROF_END_UPDATE(3) == stepprof::Status::kOk);
static_assert(STEPPROF_PADDING_FRACTION(0.1) == stepprof::Status::kOk);
static_assert(STEPPROF_DEVICE_STREAM(cudaStreamPerThread) == stepprof::Status::kOk);

/// The macros' arguments are not evaluated (as assert()'s under NDEBUG), and a variable
/// used only in them is used: this file compiles with -Werror=unused-variable
/// -Werror=unused-but-set-variable -Werror=unused-value (tests/CMakeLists.txt). Returns
/// how many arguments were evaluated: 0.
int compiled_out_arguments_evaluated() {
  int evaluated = 0;
  const int samples = 8;
  const std::int64_t frames = 9, step = 4;
  const double fraction = 0.25;
  const std::vector<std::int64_t> indices{1, 2};
  STEPPROF_COUNT("samples", samples);
  STEPPROF_COUNT("evaluated", ++evaluated);
  STEPPROF_FRAME_HISTOGRAM(frames, ++evaluated);
  STEPPROF_INPUT_SHAPE(samples, ++evaluated);
  STEPPROF_SAMPLE_INDICES(indices);
  const std::vector<int> int_indices{3};  // (any integer type, as with recording on)
  STEPPROF_SAMPLE_INDICES(int_indices);
  STEPPROF_PADDING_FRACTION(fraction);
  STEPPROF_DEVICE_STREAM(cudaStreamPerThread);  // (not declared in a CPU-only build: not named)
  STEPPROF_END_UPDATE(step);
  const stepprof::Status s = STEPPROF_END_UPDATE(++evaluated);
  return s == stepprof::Status::kOk ? evaluated : -1;
}

/// Runs `n` iterations of instrumented work with recording compiled out; returns a
/// checksum so the loop is not removed. Only macros and the inline stubs are used here.
std::int64_t run_compiled_out_work(int n) {
  std::int64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    STEPPROF_REGION("compiled_out_region");
    STEPPROF_COUNT("compiled_out_counter", 1);
    STEPPROF_FRAME_HISTOGRAM(3, 1);
    STEPPROF_INPUT_SHAPE(1, 2);
    STEPPROF_PADDING_FRACTION(0.5);
    stepprof::Region guard(stepprof::region_id("compiled_out_by_id"));
    stepprof_region_id id = 7;
    stepprof_region_register("compiled_out_c", &id);
    stepprof_region_enter(id);
    stepprof_region_exit(id);
    sum += i;
  }
  return sum;
}

/// What the stubs return.
bool compiled_out_stubs_are_inert() {
  stepprof::Options o;
  stepprof_recorder* rec = reinterpret_cast<stepprof_recorder*>(&o);
  return stepprof::open(o) == stepprof::Status::kOk && !stepprof::is_open() &&
         stepprof::end_update(1) == stepprof::Status::kOk &&
         stepprof_open("x", 0, 1, nullptr, nullptr, &rec) == STEPPROF_OK && rec == nullptr;
}
