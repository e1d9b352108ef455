// STEPPROF_REGION where only a statement that is not a declaration may go refuses to
// compile with recording on and compiled out alike (tests/CMakeLists.txt, one case per
// STEPPROF_CASE): compiled out it was a static_assert, which compiled in each case, so
// code built with STEPPROF_DISABLE failed once recording was turned on (found by a
// helper). STEPPROF_CASE 0 is the usual use, which compiles.
#include <stepprof/stepprof.hpp>

int work(int x) {
#if STEPPROF_CASE == 1
  switch (x) {
    case 0:
      STEPPROF_REGION("case_zero");
      return 1;
    case 1:  // jumps past the region's initialization
      return 2;
  }
#elif STEPPROF_CASE == 2
  if (x) goto done;
  {
    STEPPROF_REGION("before");
  }
  STEPPROF_REGION("after");
done:  // jumps past the region's initialization
  return 3;
#elif STEPPROF_CASE == 3
  if (x) STEPPROF_REGION("unbraced");
#else
  switch (x) {
    case 0: {
      STEPPROF_REGION("case_zero");
      return 1;
    }
    case 1:
      return 2;
  }
  if (x) {
    STEPPROF_REGION("braced");
  }
  STEPPROF_REGION("whole");
#endif
  return 0;
}
