// The recorder out of memory: allocations fail on request (this test binary replaces the
// global operator new), and a call that could not store its data says so and counts it
// as out_of_memory, instead of returning success.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "recorder_test_util.hpp"
#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

namespace {
thread_local bool t_fail_allocations = false;  // set around the call under test only
// Allocations of 1 MiB or more that may still succeed before the next one fails; -1: no
// limit (a memory limit that a large record reaches, as `ulimit -v` does).
thread_local long t_large_allocations_left = -1;
}  // namespace

// (GCC takes the replaced operator delete's free() for a mismatch with operator new.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (t_fail_allocations) throw std::bad_alloc();
  if (n >= (std::size_t{1} << 20) && t_large_allocations_left >= 0) {
    if (t_large_allocations_left == 0) throw std::bad_alloc();
    --t_large_allocations_left;
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace stepprof;
using namespace stepprof::test;

namespace {

struct FailAllocations {
  FailAllocations() { t_fail_allocations = true; }
  ~FailAllocations() { t_fail_allocations = false; }
};

// A host-only recorder writing to `path`, without warnings on stderr.
Options quiet_host_only(const std::string& path) {
  Options o;
  o.path = path;
  o.device_timing = DeviceTiming::kOff;
  o.print_warnings = false;
  return o;
}

std::int64_t out_of_memory_count() {
  std::vector<std::pair<std::string, std::int64_t>> counts;
  EXPECT_EQ(error_counts(counts), Status::kOk);
  for (const auto& [kind, n] : counts)
    if (kind == "out_of_memory") return n;
  return 0;
}

}  // namespace

// A thread whose first region cannot get its state (out of memory): the region was
// dropped and nothing counted it (a helper). It is counted as out_of_memory now, and the
// thread's next region, with memory again, is recorded.
TEST_F(RecorderTest, AThreadsFirstRegionOutOfMemoryIsCounted) {
  TempLog log("oom-thread");
  ASSERT_EQ(open(quiet_host_only(log.path)), Status::kOk);
  const RegionId first = region_id("oom_first"), second = region_id("oom_second");  // (named with memory)
  std::thread([&] {
    {
      FailAllocations fail;
      Region r(first);
    }
    Region r(second);
  }).join();
  EXPECT_GE(out_of_memory_count(), 1);
  ASSERT_EQ(end_update(0), Status::kOk);
  close();
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[1]["cpu_call_ms"].contains("oom_second")) << lines[1].dump();
  EXPECT_GE(lines[1]["recorder_errors"].value("out_of_memory", 0), 1) << lines[1].dump();
}

TEST_F(RecorderTest, AMicroBatchThatCannotBeStoredIsNotReportedAsRecorded) {
  TempLog log("oom-microbatch");
  ASSERT_EQ(open(quiet_host_only(log.path)), Status::kOk);
  const std::int64_t frames[] = {4, 8}, tokens[] = {100, 200};
  Status s = Status::kOk;
  {
    FailAllocations fail;
    s = microbatch(frames, tokens, {}, 256);
  }
  EXPECT_EQ(s, Status::kErrNoMemory);
  EXPECT_EQ(out_of_memory_count(), 1);

  // (The thread's last-error buffer is made large enough first: out of memory, a message
  // that does not fit is not written, and the previous one stays.)
  EXPECT_EQ(stepprof_microbatch(nullptr, nullptr, 1, nullptr, -1), STEPPROF_ERR_ARGUMENT);
  int c = STEPPROF_OK;
  {
    FailAllocations fail;
    c = stepprof_microbatch(frames, tokens, 2, nullptr, 256);
  }
  EXPECT_EQ(c, STEPPROF_ERR_NO_MEMORY);
  EXPECT_NE(std::string(stepprof_last_error()).find("out of memory"), std::string::npos) << stepprof_last_error();
  EXPECT_EQ(out_of_memory_count(), 2);


  // With memory, the same call is recorded (and the update's record holds it alone).
  EXPECT_EQ(microbatch(frames, tokens, {}, 256), Status::kOk);
  EXPECT_EQ(end_update(1), Status::kOk);
  close();
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  ASSERT_TRUE(lines[1].contains("microbatches")) << lines[1].dump();
  EXPECT_EQ(lines[1]["microbatches"].size(), 1u) << lines[1].dump();
}

// A record of many sample indices that memory runs out for while it is written: the job
// was killed (std::terminate) where end_update() returns kErrNoMemory. nlohmann's json
// destructor allocates a stack as large as an array it destroys, inside a noexcept
// destructor, while the failed allocation's exception unwound (a helper: 8 million indices
// under `ulimit -v 400000`, exit status 134). Here the first allocation of 1 MiB or more in
// end_update() succeeds and the next fails. Run in a child: the bug ended the process.
TEST_F(RecorderTest, SampleIndicesOutOfMemoryAreAnErrorNotTheEndOfTheJob) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempLog log("oom-indices");
  ASSERT_EQ(open(quiet_host_only(log.path)), Status::kOk);
  std::vector<std::int64_t> indices(400'000);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<std::int64_t>(i);
  sample_indices(indices);
  EXPECT_EXIT(
      {
        t_large_allocations_left = 1;
        const Status s = end_update(0);
        t_large_allocations_left = -1;
        const bool as_documented = s == Status::kErrNoMemory && out_of_memory_count() == 1;
        std::remove(log.path.c_str());  // (the child's own log: _Exit skips its destructor)
        std::_Exit(as_documented ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  // With memory, the same record (this process's: the child's end_update() was its own)
  // is written whole.
  EXPECT_EQ(end_update(0), Status::kOk);
  close();
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["sample_indices"].size(), indices.size());
  EXPECT_EQ(lines[1]["sample_indices"].back(), 399'999);
}
