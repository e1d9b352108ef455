// Why the stepprof command links jemalloc, with transparent huge pages.
//
// `stepprof report` keeps every update's summary (about 2 KB per update record, docs/scale.md),
// so 64 ranks x 10,000 updates allocate over a gigabyte in small blocks. On glibc's malloc
// with 4 KiB pages that was 370,000 page faults, and on a virtual machine whose first touch of
// a page is slow they were most of the run: 5.3 s wall, 3.7 s of it in the kernel. Backing the
// heap with 2 MiB transparent huge pages makes them a few thousand: 1.8-2.2 s on the same files
// (docs/scale.md, "Allocator"). jemalloc does that when asked (`thp:always`: it madvise()s its
// memory MADV_HUGEPAGE, which the kernel honours in its default THP mode "madvise"); glibc's
// malloc can only through the GLIBC_TUNABLES environment variable, read before main().
//
// The setting is compiled in through jemalloc's `malloc_conf` symbol (jemalloc(3), "TUNING"),
// so it holds without any environment; MALLOC_CONF still overrides it. Only the command is
// linked this way: the recorder and the Python module run inside the training job and keep its
// allocator.
#include "allocator.hpp"

#include <fmt/format.h>
#include <sys/types.h>

#ifdef STEPPROF_JEMALLOC
#include <jemalloc/jemalloc.h>

// Read by jemalloc when it initializes (before main). metadata_thp: its own bookkeeping too.
// narenas:1: every thread allocates from the one arena made at start-up (each keeps its
// own cache of small blocks). jemalloc 5.3 makes an arena for a new thread on its first
// allocation, and when that fails for want of address space (`ulimit -v` of 30-48 MB) it
// dereferences a null pointer; with one arena that step is never taken. On the 64 x
// 10,000 report the two settings measured the same (three runs each, interleaved).
// dirty_decay_ms:10000, muzzy_decay_ms:0 (jemalloc's defaults, stated so that they hold
// whatever the version's): pages freed about 10 s ago are handed back to the kernel as the
// command runs. From 2026-12-01 to 2026-12-04 they were never handed back (-1), which had
// measured 1.70-2.41 s against 1.86-2.79 s with the default on the 64 x 10,000 report, but
// it made the commands that allocate and free more than they keep hold memory they no
// longer used: jemalloc does not split a large freed extent for a much smaller request, so
// freed memory piled up beside fresh. On 64 ranks x 2,000 updates `html` peaked at 0.91-0.96
// GB with -1 and 0.51 GB with this setting, `whatif batched-geometry` at 0.65 and 0.50 GB
// (after a fix to the what-if's own churn; 1.0-1.15 GB before it). The 64 x 10,000 report
// measured the same either way (2.02-2.09 s against 2.06-2.08 s, interleaved, 2026-12-04).
// The cost: memory handed back and needed again is faulted in again (the what-ifs' cost
// models refit matrices of several MB); on this VM `whatif --variant group` took 4.5 s
// against 2.9 s with -1. docs/scale.md has the measurements.
extern "C" {
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): jemalloc's documented hook
const char* malloc_conf = "thp:always,metadata_thp:always,narenas:1,dirty_decay_ms:10000,muzzy_decay_ms:0";
}
#endif

namespace stepprof::cli {

std::string allocator_description() {
#ifdef STEPPROF_JEMALLOC
  auto read = [](const char* name) -> std::string {
    const char* value = nullptr;
    std::size_t size = sizeof(value);
    if (mallctl(name, static_cast<void*>(&value), &size, nullptr, 0) != 0 || value == nullptr) return "unknown";
    return value;
  };
  // opt.dirty_decay_ms is an ssize_t: -1 keeps freed pages until exit.
  ssize_t decay = 0;
  std::size_t decay_size = sizeof(decay);
  const std::string purge = mallctl("opt.dirty_decay_ms", static_cast<void*>(&decay), &decay_size, nullptr, 0) != 0
                                ? "unknown"
                            : decay < 0 ? "never"
                                        : fmt::format("after {} ms", decay);
  return fmt::format("jemalloc {} (transparent huge pages: {}; freed pages returned to the kernel: {})",
                     read("version"), read("opt.thp"), purge);
#else
  return "glibc malloc";
#endif
}

}  // namespace stepprof::cli
