// A floating-point count given to the functions does not compile either
// (tests/CMakeLists.txt, one case per STEPPROF_CASE): count(id, double) and
// frame_histogram_add converted it implicitly, truncating 3.7 to 3 (found by a helper).
// STEPPROF_CASE 0 is the same code with integers, which compiles.
#include <stepprof/stepprof.hpp>

void record(double tokens, long frames) {
  const stepprof::CounterId id = stepprof::counter_id("tokens");
#if STEPPROF_CASE == 1
  stepprof::count(id, tokens);
#elif STEPPROF_CASE == 2
  stepprof::frame_histogram_add(tokens);
#elif STEPPROF_CASE == 3
  stepprof::frame_histogram_add(frames, tokens);
#elif STEPPROF_CASE == 4
  static constinit stepprof::CounterSite site{"tokens"};
  stepprof::count(site, tokens);
#else
  stepprof::count(id, static_cast<long>(tokens));
  stepprof::count(id, 5);
  stepprof::count(id, 5u);
  stepprof::frame_histogram_add(frames);
  stepprof::frame_histogram_add(frames, 2);
  static constinit stepprof::CounterSite site{"tokens"};
  stepprof::count(site, 3);
#endif
}
