// Regions and counters on several threads while the main thread ends updates: nothing
// is lost or counted twice, each thread keeps its own parent chain, and thread states
// are reused after their threads exit. Run under ThreadSanitizer (label "threads").
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "internal.hpp"  // (src/recorder: the thread list, held by a test)
#include "recorder_test_util.hpp"
#include "stepprof/device_timer.hpp"
#include "stepprof/line_sink.hpp"
#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

using namespace stepprof;
using namespace stepprof::test;

TEST_F(RecorderTest, ThreadsRecordConcurrentlyWithEndUpdate) {
  TempLog log("threads");
  auto fake = std::make_shared<FakeDeviceClock>();
  Options o;
  o.path = log.path;
  o.run_id = "threads";
  o.device_timer = fake;
  o.device_events_per_thread = 16384;  // a round's device-timed calls fit even if no boundary frees events
  ASSERT_EQ(open(o), Status::kOk);

  constexpr int kThreads = 4, kItems = 2000, kRounds = 3;
  std::atomic<int> running{0};
  std::atomic<int> boundaries{0};  // end_update calls in the current round
  std::int64_t step = 0;
  int main_calls = 0;
  for (int round = 0; round < kRounds; ++round) {  // threads exit and new ones reuse their states
    std::vector<std::thread> workers;
    running = kThreads;
    boundaries = 0;
    for (int w = 0; w < kThreads; ++w)
      workers.emplace_back([&, w] {
        if (w == 0) {  // one worker times on the device too
          EXPECT_EQ(set_device_stream(nullptr), Status::kOk);
        }
        for (int i = 0; i < kItems; ++i) {
          STEPPROF_REGION("th_item");
          STEPPROF_COUNT("th_items", 1);
          {
            STEPPROF_REGION("th_inner");
            if (w == 0) fake->launch(nullptr, 0.001);
          }
          if (i % 500 == 0) frame_histogram_add(w + 1, 1);
          // Halfway, wait for an update boundary after this point (one that fell before the
          // worker started would not split its items), so that one falls while it runs.
          if (i == kItems / 2) {
            const int seen = boundaries.load();
            while (boundaries.load() == seen) std::this_thread::yield();
          }
        }
        --running;
      });
    while (running > 0) {  // the training loop: its own regions, and update boundaries
      {
        STEPPROF_REGION("th_main");
        ++main_calls;
      }
      EXPECT_EQ(end_update(step++), Status::kOk);
      ++boundaries;
    }
    for (auto& t : workers) t.join();
  }
  ASSERT_EQ(end_update(step++), Status::kOk);  // everything that exited is in by now
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(step) + 1);
  std::int64_t items = 0, inner = 0, main = 0, counted = 0, hist = 0, device_inner = 0, records_with_items = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const Json& u = lines[i];
    ASSERT_TRUE(u.is_object()) << "line " << i + 1 << " is not one whole record";
    if (u.contains("calls")) {
      items += u["calls"].value("th_item", 0);
      if (u["calls"].contains("th_item")) ++records_with_items;
      inner += u["calls"].value("th_inner", 0);
      main += u["calls"].value("th_main", 0);
    }
    if (u.contains("parents")) {
      if (u["parents"].contains("th_inner")) {
        EXPECT_EQ(u["parents"]["th_inner"], "th_item");
      }
      if (u["parents"].contains("th_item")) {
        EXPECT_EQ(u["parents"]["th_item"], nullptr);
      }
    }
    if (u.contains("counts")) counted += u["counts"].value("th_items", 0);
    if (u.contains("frame_histogram"))
      for (auto& [k, v] : u["frame_histogram"].items()) hist += v.get<std::int64_t>();
    if (u.contains("cuda_stream_ms") && u["cuda_stream_ms"].contains("th_inner")) ++device_inner;
    EXPECT_FALSE(u.contains("recorder_errors")) << u.dump();
  }
  EXPECT_EQ(items, kThreads * kItems * kRounds);
  EXPECT_EQ(inner, kThreads * kItems * kRounds);
  EXPECT_EQ(counted, kThreads * kItems * kRounds);
  EXPECT_EQ(hist, kThreads * (kItems / 500) * kRounds);
  EXPECT_EQ(main, main_calls);
  EXPECT_GT(device_inner, 0);
  // Each round is split by at least one boundary (while its workers wait halfway).
  EXPECT_GE(records_with_items, kRounds + 1);
}

// A Region destroyed on another thread than the one that made it (a coroutine resumed on
// another pool thread, a scope object handed over): its exit wrote the owning thread's
// stack and totals while that thread ran regions of its own (a data race: one run lost one
// of its 3,000,000 calls). The owner now closes it itself, at its next entry, with the
// time it was destroyed; and a thread that only ever gets such exits (a hand-off, the
// owner idle) is left with no stale frames (70 hand-offs made 70 open frames, and its
// regions past 64 were lost).
TEST_F(RecorderTest, ARegionDestroyedOnAnotherThreadIsClosedByItsOwnThread) {
  TempLog log("foreign-exit");
  Options o;
  o.path = log.path;
  o.device_timing = DeviceTiming::kOff;
  ASSERT_EQ(open(o), Status::kOk);
  constexpr int kItems = 20000;
  std::unique_ptr<Region> held;
  std::atomic<int> phase{0};
  std::thread owner([&] {
    {
      Region outer(region_id("fx_outer"));
      held = std::make_unique<Region>(region_id("fx_held"));
      phase = 1;
      const RegionId work = region_id("fx_work");
      for (int i = 0; i < kItems; ++i) {
        Region r(work);
        if (i == kItems / 2) {  // the other thread destroys `held` while this one works
          phase = 2;
          while (phase.load() != 3) std::this_thread::yield();
        }
      }
    }
    phase = 4;
  });
  while (phase.load() != 2) std::this_thread::yield();
  held.reset();
  phase = 3;
  owner.join();
  // Hand-offs to an idle owner: made on one thread, destroyed on another, 70 times.
  std::unique_ptr<Region> handed;
  std::atomic<int> turn{0};
  std::thread idle([&] {
    for (int k = 0; k < 70; ++k) {
      handed = std::make_unique<Region>(region_id("fx_handed"));
      turn = 2 * k + 1;
      while (turn.load() != 2 * k + 2) std::this_thread::yield();
    }
    { Region last(region_id("fx_last")); }  // recorded, at the top level
  });
  for (int k = 0; k < 70; ++k) {
    while (turn.load() != 2 * k + 1) std::this_thread::yield();
    handed.reset();
    turn = 2 * k + 2;
  }
  idle.join();
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  const Json& u = lines[1];
  EXPECT_EQ(u["calls"]["fx_work"], kItems);
  EXPECT_EQ(u["calls"]["fx_outer"], 1);
  EXPECT_EQ(u["calls"]["fx_held"], 1) << u.dump();
  EXPECT_EQ(u["parents"]["fx_held"], "fx_outer");
  EXPECT_EQ(u["parents"]["fx_work"], "fx_outer");  // (its last calls, after fx_held closed)
  // Each hand-off closed on the idle thread's next entry: 69 by the next fx_handed, the
  // last by fx_last; none stacked, none counted.
  EXPECT_EQ(u["calls"]["fx_handed"], 70);
  EXPECT_EQ(u["calls"]["fx_last"], 1);
  EXPECT_EQ(u["parents"]["fx_last"], nullptr);
  EXPECT_FALSE(u.contains("recorder_errors")) << u.dump();
}

namespace {

// Reads `fd` (a pipe's read end) until `want` lines have arrived or `ms` milliseconds
// have passed, whichever is first; returns the text.
std::string read_lines_for(int fd, std::size_t want, int ms) {
  std::string text;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) < want) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[1 << 16];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

// Host-only recorder options for a log written to the pipe whose write end is `fd`.
Options pipe_log(int fd, const char* run_id) {
  Options o;
  o.path = "/proc/self/fd/" + std::to_string(fd);
  o.device_timing = DeviceTiming::kOff;
  o.run_id = run_id;
  return o;
}

}  // namespace

// A log written to a pipe whose reader fell behind: the records its reader had not
// taken waited in the job's memory until the next end_update() or close(). While the
// job made no update (a hang in a collective, a stalled data loader) they never left,
// and a SIGKILL then lost them. A flusher thread now sends them as the reader takes
// them; a fork() child while it runs neither blocks nor writes the parent's log.
TEST_F(RecorderTest, APipesQueuedRecordsAreSentWhileTheJobMakesNoUpdate) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(open(pipe_log(fds[1], "flusher")), Status::kOk);
  // About 700 KB of records: beyond the pipe's 64 KB, within the 1 MiB queue.
  constexpr int kUpdates = 1000;
  const std::vector<std::int64_t> indices(64, 123456);
  for (int step = 0; step < kUpdates; ++step) {
    { STEPPROF_REGION("flusher_work"); }
    sample_indices(indices);
    ASSERT_EQ(end_update(step), Status::kOk) << "step " << step;  // queued, not lost
  }
  // A fork() now, with the flusher waiting for the reader (and maybe holding its lock).
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(5);  // a child that blocks is killed by SIGALRM
    { STEPPROF_REGION("flusher_child"); }
    _exit(end_update(1'000'000) == Status::kErrState ? 0 : 3);  // the child's copy is closed
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  // The reader catches up; the job makes no update meanwhile. Every record arrives, whole.
  const std::string text = read_lines_for(fds[0], kUpdates + 1, 10'000);
  std::size_t lines = 0;
  std::int64_t last_step = -1;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1, ++lines) {
    const auto j = Json::parse(text.substr(pos, nl - pos), nullptr, false);
    ASSERT_TRUE(j.is_object()) << "line " << lines + 1;
    if (lines == 0) continue;  // the config record
    EXPECT_EQ(j["step"].get<std::int64_t>(), last_step + 1);
    last_step = j["step"].get<std::int64_t>();
  }
  EXPECT_EQ(lines, static_cast<std::size_t>(kUpdates + 1)) << "records still queued in the job";
  EXPECT_EQ(last_step, kUpdates - 1);
  std::string message;
  EXPECT_EQ(close(&message), Status::kOk) << message;
  ::close(fds[1]);
  ::close(fds[0]);
}

// The flusher and end_update() write the same pipe while its reader takes the records
// slowly: every record arrives whole and in order, or is counted as a failed write.
TEST_F(RecorderTest, TheFlusherAndEndUpdateShareASlowlyReadPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(open(pipe_log(fds[1], "flusher-shared")), Status::kOk);
  std::string text;
  std::thread reader([&] {  // about 4 KB per 0.2 ms: behind the job, ahead of no one
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
      text.append(buf, static_cast<std::size_t>(n));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  constexpr int kUpdates = 3000;
  const std::vector<std::int64_t> indices(64, 654321);
  int failed = 0;
  for (int step = 0; step < kUpdates; ++step) {
    { STEPPROF_REGION("shared_work"); }
    sample_indices(indices);
    if (end_update(step) != Status::kOk) ++failed;
    if (step % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the flusher's turn
  }
  std::string message;
  const Status closed = close(&message);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  std::size_t lines = 0;
  std::int64_t last_step = -1;
  for (std::size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1, ++lines) {
    const auto j = Json::parse(text.substr(pos, nl - pos), nullptr, false);
    ASSERT_TRUE(j.is_object()) << "line " << lines + 1;
    if (lines == 0) continue;
    EXPECT_GT(j["step"].get<std::int64_t>(), last_step);
    last_step = j["step"].get<std::int64_t>();
  }
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::size_t lost = kUpdates + 1 - lines;
  if (lost == 0) {
    EXPECT_EQ(closed, Status::kOk) << message;
  } else {
    EXPECT_NE(message.find("write_failed " + std::to_string(lost)), std::string::npos)
        << message << " (" << lines << " lines arrived, " << failed << " end_update warnings)";
  }
}

// A scope object made on the thread that ends updates and destroyed on another one before
// end_update(), with no region entered in between: end_update() found the region still
// open (open_at_end_update in every record, "end_update() was called inside a region"),
// its time went into the next update's record, and the last one was lost at close().
// Now end_update() closes it first, at the time it was destroyed.
TEST_F(RecorderTest, ARegionEndedOnAnotherThreadBeforeEndUpdateIsInThatUpdate) {
  TempLog log("handed-before-end");
  Options o;
  o.path = log.path;
  o.device_timing = DeviceTiming::kOff;
  ASSERT_EQ(open(o), Status::kOk);
  constexpr int kUpdates = 4;
  std::vector<double> held_ms;  // measured here: from before the Region to after its delete
  for (int step = 0; step < kUpdates; ++step) {
    const double t0 = now_ms();
    auto* r = new Region(region_id("handed_over"));
    spin_ms(5);
    std::thread([r] { delete r; }).join();  // ends here, on another thread
    held_ms.push_back(now_ms() - t0);
    spin_ms(10);
    ASSERT_EQ(end_update(step), Status::kOk);
  }
  std::string message;
  EXPECT_EQ(close(&message), Status::kOk) << message;
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kUpdates + 1));
  for (int step = 0; step < kUpdates; ++step) {
    const Json& u = lines[static_cast<std::size_t>(step) + 1];
    EXPECT_FALSE(u.contains("recorder_errors")) << u.dump();
    ASSERT_TRUE(u["cpu_call_ms"].contains("handed_over")) << "step " << step << ": " << u.dump();
    EXPECT_EQ(u["calls"]["handed_over"], 1);
    const double ms = u["cpu_call_ms"]["handed_over"].get<double>();
    EXPECT_GE(ms, 5.0);
    EXPECT_LE(ms, held_ms[static_cast<std::size_t>(step)] + 0.5);  // (not the next update's 10 ms too)
    EXPECT_LT(ms, u["wall_ms"].get<double>());
  }
}

// Another thread's work done while end_update() waits for the thread list (descheduled,
// or the list's lock held: a thread starting up) ended before the update's boundary, so
// the update's wall_ms holds it. The boundary's time was read before the wait: a helper's
// busy machine gave records of 0.06 ms holding 12 ms of another thread's regions.
TEST_F(RecorderTest, WorkOfAnotherThreadWhileEndUpdateWaitsIsWithinThatUpdatesWallTime) {
  TempLog log("end-update-waits");
  Options o;
  o.path = log.path;
  o.device_timing = DeviceTiming::kOff;
  ASSERT_EQ(open(o), Status::kOk);
  const auto id = region_id("worker_item");
  std::atomic<int> phase{0};  // 1: the worker is registered; 2: go; 3: its region ended
  std::thread worker([&] {
    { Region r(id); }  // (registers this thread: the thread list's lock is not taken again)
    phase.store(1);
    while (phase.load() != 2) std::this_thread::sleep_for(std::chrono::microseconds(100));
    {
      Region r(id);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    phase.store(3);
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_EQ(end_update(0), Status::kOk);
  auto& list = detail::thread_registry();
  list.mu.lock();  // (as a thread that is registering holds it)
  std::thread ender([] { EXPECT_EQ(end_update(1), Status::kOk); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ender waits for the lock
  phase.store(2);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (phase.load() != 3 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  list.mu.unlock();
  ender.join();
  worker.join();
  std::string message;
  EXPECT_EQ(close(&message), Status::kOk) << message;
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  const Json& u = lines[2];
  ASSERT_TRUE(u["cpu_call_ms"].contains("worker_item")) << u.dump();
  EXPECT_EQ(u["calls"]["worker_item"], 1);
  EXPECT_GE(u["cpu_call_ms"]["worker_item"].get<double>(), 30.0);
  EXPECT_GE(u["wall_ms"].get<double>(), u["cpu_call_ms"]["worker_item"].get<double>()) << u.dump();
}

namespace {
// Opens the recorder through the C ABI on `path`, device timing off, quiet.
stepprof_recorder* open_through_c(const std::string& path) {
  stepprof_recorder* rec = nullptr;
  EXPECT_EQ(stepprof_open(path.c_str(), 0, 1, nullptr, R"({"device_timing": "off", "print_warnings": false})", &rec),
            STEPPROF_OK)
      << stepprof_last_error();
  return rec;
}
}  // namespace

// Two threads closing one C handle at once: one closes the recorder and frees the handle,
// the other is told it is not open (it used to pass the check too and free it a second
// time: glibc aborts with "double free", ASan reports it).
TEST_F(RecorderTest, TwoThreadsClosingOneCHandleFreeItOnce) {
  TempLog log("close-race");
  for (int round = 0; round < 50; ++round) {
    stepprof_recorder* rec = open_through_c(log.path);
    ASSERT_NE(rec, nullptr);
    ASSERT_EQ(stepprof_end_update(rec, 1), STEPPROF_OK);
    std::atomic<int> ready{0};
    int results[2] = {1, 1};
    auto closer = [&](int i) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      results[i] = stepprof_close(rec);
    };
    std::thread a(closer, 0), b(closer, 1);
    a.join();
    b.join();
    std::sort(results, results + 2);
    EXPECT_EQ(results[0], STEPPROF_ERR_STATE) << "round " << round;
    EXPECT_EQ(results[1], STEPPROF_OK) << "round " << round;
    EXPECT_FALSE(is_open());
  }
}

// Calls with the handle on another thread while the main thread closes and opens again:
// a call never reads the handle it was given (a handle being freed by stepprof_close was
// read by the check; ThreadSanitizer reports that), and answers OK or ERR_STATE.
TEST_F(RecorderTest, CallsOnAnotherThreadWhileTheCHandleIsClosed) {
  TempLog log("close-calls");
  std::atomic<stepprof_recorder*> shared{nullptr};
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, calls{0};
  std::thread caller([&] {
    while (!stop.load()) {
      stepprof_recorder* rec = shared.load();
      if (!rec) continue;
      const std::int64_t n = stepprof_error_count(rec, nullptr);
      if (n < 0 && n != STEPPROF_ERR_STATE) bad.fetch_add(1);
      calls.fetch_add(1);
    }
  });
  for (int round = 0; round < 200; ++round) {
    stepprof_recorder* rec = open_through_c(log.path);
    ASSERT_NE(rec, nullptr);
    shared.store(rec);
    const long before = calls.load();
    while (calls.load() < before + 2) {
    }
    ASSERT_EQ(stepprof_close(rec), STEPPROF_OK);
  }
  stop.store(true);
  caller.join();
  EXPECT_EQ(bad.load(), 0);
}

// A fork() child's copy of a pipe's sink whose flusher waits for work (on a condition
// variable): glibc's destructor of the child's copy of that variable waited for the
// waiter, which does not exist in the child, so a child that destroyed the sink (after
// release_in_child, as a new open() in the child would) hung forever.
TEST(FileSinkFork, AChildDestroysItsCopyOfASinkWhoseFlusherWaits) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  int error = 0;
  auto sink = open_file_sink("/proc/self/fd/" + std::to_string(fds[1]), false, error);
  ASSERT_NE(sink, nullptr) << error;
  const std::string line(1000, 'x');
  std::size_t written = 0;
  for (int i = 0; i < 200; ++i)  // 200 KB: beyond the pipe's 64 KB, so some waits and the flusher starts
    ASSERT_EQ(sink->write(line + "\n", written), 0);
  const std::string text = read_lines_for(fds[0], 200, 10'000);  // the flusher sends the rest
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // (the flusher back waiting for work)
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(5);  // a child that hangs is killed by SIGALRM
    sink->release_in_child();
    sink.reset();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(sink->close(), 0);
  EXPECT_EQ(sink->unwritten_records(), 0u);
  ::close(fds[0]);
  ::close(fds[1]);
}
