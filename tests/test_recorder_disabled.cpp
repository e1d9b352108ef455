// Compile-out: a translation unit built with STEPPROF_DISABLE (recorder_disabled_tu.cpp)
// records nothing even while this one, built normally, has a recorder open; its
// macros expand to nothing (checked there with static_assert).
#include <gtest/gtest.h>

#include "recorder_test_util.hpp"
#include "stepprof/stepprof.hpp"

std::int64_t run_compiled_out_work(int n);
bool compiled_out_stubs_are_inert();
int compiled_out_arguments_evaluated();

using namespace stepprof;
using namespace stepprof::test;

static_assert(stepprof::kEnabled);

TEST_F(RecorderTest, CompiledOutCodeRecordsNothing) {
  TempLog log("disabled");
  Options o;
  o.path = log.path;
  o.device_timing = DeviceTiming::kOff;
  ASSERT_EQ(open(o), Status::kOk);
  { STEPPROF_REGION("enabled_region"); }
  EXPECT_EQ(run_compiled_out_work(100), 4950);
  EXPECT_TRUE(compiled_out_stubs_are_inert());
  EXPECT_EQ(compiled_out_arguments_evaluated(), 0);
  EXPECT_TRUE(is_open());  // the stubs' open/end_update did not touch the real recorder
  ASSERT_EQ(end_update(0), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);  // the stub's end_update(1) wrote nothing
  EXPECT_EQ(lines[1]["calls"], (Json{{"enabled_region", 1}}));
  EXPECT_FALSE(lines[1].contains("counts"));
  EXPECT_FALSE(lines[1].contains("frame_histogram"));
  EXPECT_FALSE(lines[1].contains("input_shapes"));
  EXPECT_FALSE(lines[1].contains("padding_fraction"));
  EXPECT_FALSE(lines[1].contains("recorder_errors"));
}
