// On large inputs the report's analyses run on several threads (the region table's
// rows, and the region table beside the other analyses). The result must not depend
// on that: the same dataset gives the same report on every run, with the figures
// worked out by hand below. (ThreadSanitizer runs this test: label threads.)
#include <gtest/gtest.h>

#include "stepprof/analysis/report.hpp"
#include "stepprof/render/render.hpp"

using namespace stepprof;

namespace {

// 4 ranks x 15,000 updates (above the threshold for threads), regions in two levels.
Dataset big_dataset() {
  Dataset d;
  const auto top = d.regions.intern("step_total");
  const auto fwd = d.regions.intern("forward");
  const auto comm = d.regions.intern("allreduce");
  const auto samples = d.counters.intern("samples");
  for (int r = 0; r < 4; ++r) {
    RankLog log;
    log.rank = r;
    for (int s = 0; s < 15000; ++s) {
      UpdateRecord u;
      u.rank = r;
      u.step = s;
      const double f = 100.0 + (s * 7 + r * 13) % 50;  // 100..149 ms
      const double c = 200.0 - f;                       // absorbs the difference
      u.wall_ms = 210;
      u.regions.push_back({top, kTopLevel, f + c + 1, f + c + 1.5, 1});
      u.regions.push_back({fwd, top, f, f + 0.5, 2});
      u.regions.push_back({comm, top, c, c, 1});
      u.counters.push_back({samples, 16});
      log.updates.push_back(std::move(u));
    }
    d.ranks.push_back(std::move(log));
  }
  return d;
}

}  // namespace

TEST(AnalysisParallel, LargeReportIsTheSameOnEveryRun) {
  const Dataset d = big_dataset();
  Diagnostics diag;
  const auto h = hierarchy_from_log(d, diag);
  ASSERT_TRUE(h);
  const AnalysisInput in{d, &*h};
  const std::string first = render_json(build_report(in), diag);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(render_json(build_report(in), diag), first);

  const Report r = build_report(in);
  ASSERT_EQ(r.regions.rows.size(), 3u);
  const RegionRow& fwd = r.regions.rows[1];
  EXPECT_EQ(fwd.name, "forward");
  // forward takes 100 + ((7 s + 13 r) mod 50) ms: over s = 0..14999 every residue mod 50
  // occurs equally often for each rank, so the values are uniform on 100..149.
  ASSERT_TRUE(fwd.device_ms);
  EXPECT_EQ(fwd.device_ms->n, 60000u);
  EXPECT_EQ(fwd.device_ms->min, 100);
  EXPECT_EQ(fwd.device_ms->max, 149);
  EXPECT_DOUBLE_EQ(fwd.device_ms->median, 124.5);
  EXPECT_DOUBLE_EQ(fwd.device_ms->mean, 124.5);
  // The parent's own time: (f + c + 1) - f - c = 1 ms in every update.
  ASSERT_TRUE(r.regions.rows[0].device_self_ms);
  EXPECT_DOUBLE_EQ(r.regions.rows[0].device_self_ms->median, 1.0);
  EXPECT_EQ(r.regions.violation_count, 0u);
}
