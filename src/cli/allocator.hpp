// The memory allocator the stepprof command runs on, and how it is set up.
#pragma once

#include <string>

namespace stepprof::cli {

/// One line naming the allocator this binary uses and its huge-page setting, for
/// `stepprof --version`: "jemalloc 5.3.0-0-g54eaed1 (transparent huge pages: always)",
/// or "glibc malloc" in builds without jemalloc (sanitizer builds, STEPPROF_JEMALLOC=OFF).
/// Never throws; a setting jemalloc does not report reads "unknown".
[[nodiscard]] std::string allocator_description();

}  // namespace stepprof::cli
