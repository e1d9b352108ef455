// Device timing, driven by FakeDeviceClock: events recorded at region entry and exit,
// read back only at the update boundary; what happens with and without the boundary
// synchronization, when the event ring runs out, when recording fails, and on a second
// thread with its own stream. Expected times are hand-computed from the simulated work.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>

#include <thread>

#include "recorder_test_util.hpp"
#include "stepprof/device_timer.hpp"
#include "stepprof/stepprof.hpp"

using namespace stepprof;
using namespace stepprof::test;

namespace {

Options with_fake(const std::string& path, const std::shared_ptr<FakeDeviceClock>& fake) {
  Options o;
  o.path = path;
  o.run_id = "device-test";
  o.device_timer = fake;
  return o;
}

}  // namespace

TEST_F(RecorderTest, DeviceTimesAreReadBackAtTheBoundary) {
  TempLog log("device-sync");
  auto fake = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, fake)), Status::kOk);
  {
    STEPPROF_REGION("g_outer");  // stream idle at device time 0: entry event at 0
    fake->launch(nullptr, 2);    // busy until 2
    {
      STEPPROF_REGION("g_inner");  // entry at 2
      fake->launch(nullptr, 3);    // exit at 5
    }
    fake->launch(nullptr, 1);  // exit at 6
  }
  EXPECT_EQ(fake->now_ms(), 0);  // nothing waited inside the regions
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(fake->synchronize_calls(), 1);  // one stream, synchronized once at the boundary
  EXPECT_EQ(fake->now_ms(), 6);
  {
    STEPPROF_REGION("g_inner");  // entry at 6
    fake->launch(nullptr, 4);    // exit at 10
  }
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["device_timing"], "fake");
  EXPECT_EQ(lines[1]["cuda_stream_ms"], (Json{{"g_outer", 6.0}, {"g_inner", 3.0}}));
  EXPECT_EQ(lines[1]["calls"], (Json{{"g_outer", 1}, {"g_inner", 1}}));
  EXPECT_EQ(lines[2]["cuda_stream_ms"], (Json{{"g_inner", 4.0}}));
  EXPECT_EQ(fake->record_calls(), 6);  // 2 per region call
}

TEST_F(RecorderTest, WithoutBoundarySyncUnfinishedDeviceTimesCarryOver) {
  TempLog log("device-nosync");
  auto fake = std::make_shared<FakeDeviceClock>();
  Options o = with_fake(log.path, fake);
  o.sync_at_update = false;
  ASSERT_EQ(open(o), Status::kOk);
  {
    STEPPROF_REGION("c_first");  // 0 .. 2
    fake->launch(nullptr, 2);
  }
  {
    STEPPROF_REGION("c_second");  // 2 .. 5
    fake->launch(nullptr, 3);
  }
  fake->advance(3);  // the device has reached 3: c_first is done, c_second is not
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(end_update(1), Status::kOk);  // still at 3: nothing new
  fake->advance(10);
  ASSERT_EQ(end_update(2), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(fake->synchronize_calls(), 0);  // never waited

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1]["cuda_stream_ms"], (Json{{"c_first", 2.0}}));
  EXPECT_EQ(lines[1]["calls"], (Json{{"c_first", 1}, {"c_second", 1}}));  // host side: both done
  EXPECT_FALSE(lines[2].contains("cuda_stream_ms"));
  EXPECT_FALSE(lines[2].contains("calls"));
  // The late device time lands in the record of the boundary that read it, with its parent.
  EXPECT_EQ(lines[3]["cuda_stream_ms"], (Json{{"c_second", 3.0}}));
  EXPECT_EQ(lines[3]["parents"], (Json{{"c_second", nullptr}}));
  EXPECT_FALSE(lines[3].contains("calls"));
  EXPECT_FALSE(lines[3].contains("cpu_call_ms"));
}

TEST_F(RecorderTest, ExhaustedEventRingIsCountedNotBlocking) {
  TempLog log("device-ring");
  auto fake = std::make_shared<FakeDeviceClock>();
  Options o = with_fake(log.path, fake);
  o.device_events_per_thread = 8;  // 4 region calls per update
  ASSERT_EQ(open(o), Status::kOk);
  for (int i = 0; i < 6; ++i) {
    STEPPROF_REGION("ring_call");
    fake->launch(nullptr, 1);
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  for (int i = 0; i < 3; ++i) {  // events are free again after the boundary
    STEPPROF_REGION("ring_call");
    fake->launch(nullptr, 1);
  }
  ASSERT_EQ(end_update(1), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["calls"]["ring_call"], 6);
  // Calls 1-4 are device-timed (1 ms each); calls 5 and 6 find no free event. Their work
  // (2 ms) still runs on the stream but outside any timed interval.
  EXPECT_EQ(lines[1]["cuda_stream_ms"]["ring_call"], 4.0);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"device_events_exhausted", 2}}));
  EXPECT_EQ(lines[2]["cuda_stream_ms"]["ring_call"], 3.0);
  EXPECT_FALSE(lines[2].contains("recorder_errors"));
}

TEST_F(RecorderTest, FailedEventRecordIsCounted) {
  TempLog log("device-fail");
  auto fake = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, fake)), Status::kOk);
  fake->fail_next_records(1);
  {
    STEPPROF_REGION("f_region");  // the entry event fails: host time only for this call
    fake->launch(nullptr, 5);
  }
  {
    STEPPROF_REGION("f_region");
    fake->launch(nullptr, 2);
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  EXPECT_EQ(lines[1]["calls"]["f_region"], 2);
  EXPECT_EQ(lines[1]["cuda_stream_ms"]["f_region"], 2.0);
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"device_record_failed", 1}}));
}

// A timer that gives a non-finite time (a broken driver, a user's own DeviceTimer) does
// not make the region's device time NaN (written as absent, or as invalid JSON): the
// time is left out and counted as a read failure.
TEST_F(RecorderTest, NonFiniteDeviceTimeIsCountedNotWritten) {
  TempLog log("device-nan");
  auto fake = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, fake)), Status::kOk);
  {
    STEPPROF_REGION("n_region");
    fake->launch(nullptr, std::numeric_limits<double>::quiet_NaN());
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  EXPECT_EQ(lines[1]["calls"]["n_region"], 1);
  EXPECT_FALSE(lines[1].contains("cuda_stream_ms") && lines[1]["cuda_stream_ms"].contains("n_region"));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"device_read_failed", 1}}));
}

// A negative or absurd device time (events recorded out of order, a broken driver) was
// written as it came: the reader then rejected the whole record, host times too
// ("negative time", "out of range"). Such a reading is left out and counted, as NaN is.
TEST_F(RecorderTest, NegativeOrAbsurdDeviceTimeIsCountedNotWritten) {
  TempLog log("device-negative");
  auto fake = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, fake)), Status::kOk);
  {
    STEPPROF_REGION("ok_region");
    fake->launch(nullptr, 2.0);
  }
  {
    STEPPROF_REGION("neg_region");
    fake->launch(nullptr, -5.0);  // (the fake's stream goes back: its end event before its start)
  }
  {
    STEPPROF_REGION("huge_region");
    fake->launch(nullptr, 1e30);
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(close(), Status::kWarnErrors);
  const auto lines = read_lines(log.path);
  EXPECT_EQ(lines[1]["calls"]["neg_region"], 1);
  EXPECT_EQ(lines[1]["calls"]["huge_region"], 1);
  EXPECT_EQ(lines[1]["cuda_stream_ms"], (Json{{"ok_region", 2.0}}));
  EXPECT_EQ(lines[1]["recorder_errors"], (Json{{"device_read_failed", 2}}));
}

TEST_F(RecorderTest, EachDeviceThreadUsesItsOwnStream) {
  TempLog log("device-threads");
  auto fake = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, fake)), Status::kOk);
  int side_stream_tag = 0;
  void* side = &side_stream_tag;
  std::thread worker([&] {
    EXPECT_EQ(set_device_stream(side), Status::kOk);
    STEPPROF_REGION("t_side");
    fake->launch(side, 7);
  });
  worker.join();
  std::thread host_only_worker([&] {
    STEPPROF_REGION("t_host_only");  // this thread never set a stream: host time only
    fake->launch(side, 1);
  });
  host_only_worker.join();
  {
    STEPPROF_REGION("t_main");
    fake->launch(nullptr, 2);
  }
  ASSERT_EQ(end_update(0), Status::kOk);
  EXPECT_EQ(fake->synchronize_calls(), 2);  // the default stream and the side stream
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  EXPECT_EQ(lines[1]["cuda_stream_ms"], (Json{{"t_side", 7.0}, {"t_main", 2.0}}));
  EXPECT_EQ(lines[1]["calls"], (Json{{"t_side", 1}, {"t_host_only", 1}, {"t_main", 1}}));
  EXPECT_EQ(set_device_stream(side), Status::kErrState);  // closed
}

TEST_F(RecorderTest, CudaTimerSaysWhyItIsOff) {
  const auto timer = make_cuda_device_timer();
  TempLog log("device-cuda");
  Options o;
  o.path = log.path;
  o.run_id = "cuda";
  ASSERT_EQ(open(o), Status::kOk);  // device_timing auto: the real CUDA timer
  { STEPPROF_REGION("cuda_auto_region"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  const Status stream_status = set_device_stream(nullptr);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["device_timing"], timer->status());
  if (timer->available()) {
    EXPECT_EQ(timer->status(), "cuda-events");
  } else {
    // No GPU here: device fields absent, and the config says why.
    EXPECT_EQ(timer->status().rfind("off: ", 0), 0u) << timer->status();
    EXPECT_FALSE(lines[1].contains("cuda_stream_ms"));
    EXPECT_EQ(stream_status, Status::kErrState);  // no device timing to put the thread on
  }
}

// close() leaves the session's events alive and the next open() destroys them: a thread
// timing regions on a stream as close() ran could record an event close() had destroyed
// (a helper's fake driver saw cuEventRecord given a destroyed event in 10 of 10 runs).
TEST_F(RecorderTest, CloseLeavesTheEventsToTheNextOpen) {
  TempLog log("device-release");
  auto first = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, first)), Status::kOk);
  { STEPPROF_REGION("g_released"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  // A thread that keeps timing regions while close() runs: no record may come after the
  // events are destroyed, so none is destroyed yet.
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    (void)set_device_stream(reinterpret_cast<void*>(1));
    while (!stop.load()) {
      STEPPROF_REGION("g_worker");
    }
  });
  for (int i = 0; i < 10000 && first->record_calls() < 100; ++i)  // (at most 10 s: a worker timing nothing fails)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(first->record_calls(), 100);
  (void)close();  // (kWarnErrors: the worker's regions after the last update are unwritten)
  const int released_at_close = first->release_calls();
  stop = true;
  worker.join();
  EXPECT_EQ(released_at_close, 0);
  auto second = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, second)), Status::kOk);
  EXPECT_EQ(first->release_calls(), 1);  // the closed session's events, now
  ASSERT_EQ(close(), Status::kOk);
  EXPECT_EQ(second->release_calls(), 0);
}

// A fork() child's open() after the parent's close() destroyed the parent's events (the
// closed session's, left to the next open: found by a reviewer). The child's copy of the
// fake counts what the child did.
TEST_F(RecorderTest, AForkedChildsOpenLeavesTheParentsEventsAlone) {
  TempLog log("device-fork"), child_log("device-fork-child");
  auto first = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, first)), Status::kOk);
  { STEPPROF_REGION("g_forked"); }
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto second = std::make_shared<FakeDeviceClock>();
    const bool opened = open(with_fake(child_log.path, second)) == Status::kOk;
    const bool untouched = first->release_calls() == 0;
    (void)close();
    ::_exit(opened && untouched ? 0 : 1);
  }
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The parent's own next open() does destroy them.
  auto third = std::make_shared<FakeDeviceClock>();
  ASSERT_EQ(open(with_fake(log.path, third)), Status::kOk);
  EXPECT_EQ(first->release_calls(), 1);
  ASSERT_EQ(close(), Status::kOk);
}

