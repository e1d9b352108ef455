// Regions and counters on several threads while the main thread ends updates: nothing
// is lost or counted twice, each thread keeps its own parent chain, and thread states
// are reused after their threads exit. Run under ThreadSanitizer (label "threads").
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "recorder_test_util.hpp"
#include "stepprof/device_timer.hpp"
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
