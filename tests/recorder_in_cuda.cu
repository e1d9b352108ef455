// The recorder's macros in a CUDA source file, built by nvcc (tests/CMakeLists.txt, where
// nvcc is installed) with every warning an error: its front end warned that tls_model
// "does not apply here" on the recorder's thread-local state, twice per file.
#include <stepprof/stepprof.hpp>

__global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }

void launch_timed(float* x, int step) {
  {
    STEPPROF_REGION("add_one");
    add_one<<<1, 32>>>(x);
  }
  STEPPROF_COUNT("launches", 1);
  (void)stepprof::end_update(step);
}
