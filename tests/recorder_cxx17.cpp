// Included by a C++17 file, stepprof.hpp says it needs C++20 (tests/CMakeLists.txt): it
// failed deep inside with "'constinit' does not name a type".
#include <stepprof/stepprof.hpp>
