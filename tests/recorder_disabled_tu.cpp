// Built with STEPPROF_DISABLE (tests/CMakeLists.txt): every macro must compile to nothing.
#ifndef STEPPROF_DISABLE
#error "this file must be compiled with STEPPROF_DISABLE defined"
#endif
#include <cstdint>
#include <string_view>

#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

#define STEPPROF_TEST_STR(...) #__VA_ARGS__
#define STEPPROF_TEST_XSTR(...) STEPPROF_TEST_STR(__VA_ARGS__)

// The macros' expansions, as text: empty.
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_REGION("x"))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_COUNT("x", 1))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_FRAME_HISTOGRAM(9, 1))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_INPUT_SHAPE(8, 3154))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_SAMPLE_INDICES(v))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_PADDING_FRACTION(0.1))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_DEVICE_STREAM(nullptr))).empty());
static_assert(std::string_view(STEPPROF_TEST_XSTR(STEPPROF_END_UPDATE(3))).empty());
static_assert(!stepprof::kEnabled);

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
