// A floating-point count does not compile (tests/CMakeLists.txt): STEPPROF_COUNT cast it
// to int64, truncating 3.7 to 3, and undefined behaviour for 1e300 or NaN.
#include <stepprof/stepprof.hpp>

void count_a_double(double tokens) { STEPPROF_COUNT("tokens", tokens); }
