// Records three optimizer updates through the C API from C++17 code. The u8 literal is a
// const char* in C++17 and a const char8_t* in C++20, where this file does not compile:
// built, it shows the target left the standard at C++17.
#include <cstdio>

#include <stepprof/stepprof.h>

static const char* kRegion = u8"forward";
static_assert(__cplusplus == 201703L, "compiled as C++17");

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  stepprof_recorder* rec = nullptr;
  if (stepprof_open(argv[1], 0, 1, "{\"micro_batch\": 4}", "{\"device_timing\": \"off\"}", &rec) != STEPPROF_OK) {
    std::fprintf(stderr, "open: %s\n", stepprof_last_error());
    return 1;
  }
  stepprof_region_id fwd;
  if (stepprof_region_register(kRegion, &fwd) != STEPPROF_OK) return 1;
  for (int step = 0; step < 3; ++step) {
    stepprof_region_enter(fwd);
    stepprof_region_exit(fwd);
    if (stepprof_end_update(rec, step) != STEPPROF_OK) return 1;
  }
  return stepprof_close(rec) == STEPPROF_OK ? 0 : 1;
}
