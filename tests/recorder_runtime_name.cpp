// A region name that is not a constant string does not compile, with recording on or
// compiled out (tests/CMakeLists.txt): a call site's name lives in a constant-initialized
// static, so a name made at run time cannot be one (use stepprof::region_id for those).
#include <stepprof/stepprof.hpp>

void time_a_region_named_at_run_time(const char* name) { STEPPROF_REGION(name); }
