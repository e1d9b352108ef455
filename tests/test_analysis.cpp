// Analyses on small hand-built datasets whose answers are worked out in the comments.
#include <gtest/gtest.h>

#include <limits>
#include <tuple>

#include "stepprof/analysis/report.hpp"
#include "test_util.hpp"

using namespace stepprof;

namespace {

// Builds a one-rank dataset update by update, with its run settings.
struct Builder : test::DatasetBuilder {
  using DatasetBuilder::DatasetBuilder;
  void config(std::int64_t world, std::int64_t micro, std::int64_t acc) {
    RunConfig c;
    c.rank = 0;
    c.world_size = world;
    c.micro_batch = micro;
    c.accumulation = acc;
    d.ranks[0].config = c;
  }
};

Hierarchy parse(const std::string& text) {
  Diagnostics diag;
  auto h = parse_hierarchy(text, "test", diag);
  EXPECT_TRUE(h);
  return *h;
}

const RegionRow& row(const RegionTable& t, std::string_view name) {
  for (const auto& r : t.rows)
    if (r.name == name) return r;
  ADD_FAILURE() << "no row " << name;
  return t.rows.front();
}

// The report's first finding of `kind`, or nullptr.
const Finding* finding_of(const Report& r, std::string_view kind) {
  const auto f = std::find_if(r.findings.begin(), r.findings.end(), [&](const Finding& x) { return x.kind == kind; });
  return f == r.findings.end() ? nullptr : &*f;
}

}  // namespace

TEST(Regions, ExclusiveTimeShareAndOutside) {
  Builder b;
  // step: wall 100 and 120; "outer" 90 and 110 with children a (30, 40) and b (50, 50).
  for (auto [step, wall, outer, a, bb] : {std::tuple{1, 100.0, 90.0, 30.0, 50.0}, std::tuple{2, 120.0, 110.0, 40.0, 50.0}}) {
    auto& u = b.add(step, wall);
    b.region(u, "outer", outer, outer + 1);
    b.region(u, "a", a, a);
    b.region(u, "b", bb, bb);
  }
  const Hierarchy h = parse("outer\n  a\n  b\n");
  const RegionTable t = analyze_regions({b.d, &h});
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].name, "outer");
  EXPECT_EQ(t.rows[1].depth, 1);
  const auto& outer = row(t, "outer");
  // Self: 90 - 80 = 10 and 110 - 90 = 20 -> median 15.
  EXPECT_DOUBLE_EQ(outer.device_self_ms->median, 15);
  // Share: (90 + 110) / (100 + 120).
  EXPECT_DOUBLE_EQ(outer.share, 200.0 / 220.0);
  EXPECT_DOUBLE_EQ(outer.self_share.value_or(-1), 30.0 / 220.0);
  // Outside: wall - outer host = 100 - 91 = 9 and 120 - 111 = 9.
  EXPECT_DOUBLE_EQ(t.outside_regions_ms->median, 9);
  EXPECT_EQ(t.violation_count, 0u);
  EXPECT_FALSE(row(t, "a").device_self_ms.has_value());  // a leaf
}

// A region with device time in some updates and host time only in the others (called on
// a thread without device timing there): its share takes each update's device time where
// it has one, else its host time. 6 x 8 ms device + 6 x 4 ms host over 12 x 100 ms = 6 %;
// the host-only updates were left out (4 %). Its parent's self share likewise: 6 x (20 -
// 8) + 6 x (10 - 4) = 108 over 1200 = 9 %.
TEST(Regions, ShareTakesHostTimeWhereAnUpdateHasNoDeviceTime) {
  Builder b;
  for (int step = 1; step <= 12; ++step) {
    auto& u = b.add(step, 100);
    const bool device = step <= 6;
    b.region(u, "outer", device ? std::optional<double>(20) : std::nullopt, 10.0);
    b.region(u, "mixed", device ? std::optional<double>(8) : std::nullopt, 4.0);
  }
  const Hierarchy h = parse("outer\n  mixed\n");
  const RegionTable t = analyze_regions({b.d, &h});
  EXPECT_DOUBLE_EQ(row(t, "mixed").share, 72.0 / 1200.0);
  EXPECT_DOUBLE_EQ(row(t, "mixed").self_share.value_or(-1), 72.0 / 1200.0);
  EXPECT_DOUBLE_EQ(row(t, "outer").share, 180.0 / 1200.0);
  EXPECT_DOUBLE_EQ(row(t, "outer").self_share.value_or(-1), 108.0 / 1200.0);
}

TEST(Regions, ChildrenExceedingTheParentAreFlagged) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, "outer", 50.0, 50.0);
  b.region(u, "a", 40.0, 40.0);
  b.region(u, "b", 20.0, 20.0);  // 60 > 50 + max(0.5, 0.5)
  const Hierarchy h = parse("outer\n  a\n  b\n");
  const RegionTable t = analyze_regions({b.d, &h});
  EXPECT_EQ(t.violation_count, 2u);  // device and host
  EXPECT_EQ(t.violations[0].parent, "outer");
  EXPECT_DOUBLE_EQ(t.violations[0].children_ms, 60);
  using Kids = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(t.violations[0].children, (Kids{{"a", 40.0}, {"b", 20.0}}));  // longest first
  EXPECT_EQ(violation_children_text(t.violations[0]), " (a 40.0 ms, b 20.0 ms)");
}

// Which children overlap: a thread pool's regions at the top level with the update's
// own (the recorder nests per thread). The finding names the longest four, and counts
// the rest.
TEST(Regions, AViolationNamesItsLongestChildren) {
  Builder b;
  auto& u = b.add(3, 100);
  b.region(u, "forward", std::nullopt, 70.0);
  for (int w = 0; w < 6; ++w) b.region(u, "worker_op" + std::to_string(w), std::nullopt, 10.0 + w);
  const Hierarchy h = parse("forward\nworker_op0\nworker_op1\nworker_op2\nworker_op3\nworker_op4\nworker_op5\n");
  const AnalysisInput in{b.d, &h};
  const Report r = build_report(in);
  ASSERT_EQ(r.regions.violations.size(), 1u);
  const auto& v = r.regions.violations[0];
  EXPECT_EQ(v.parent, kUpdateAsParent);
  EXPECT_DOUBLE_EQ(v.children_ms, 70 + 10 + 11 + 12 + 13 + 14 + 15);
  EXPECT_EQ(v.children_total, 7u);
  const auto it = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.kind == "nesting"; });
  ASSERT_NE(it, r.findings.end());
  EXPECT_NE(it->evidence.find("take 145.0 ms (forward 70.0 ms, worker_op5 15.0 ms, worker_op4 14.0 ms, worker_op3 "
                              "13.0 ms and 3 more), more than its 100.0 ms"),
            std::string::npos)
      << it->evidence;
}

// A region around several updates (an epoch) exits in one of them, taking longer than
// that update: the nesting finding says it spans updates, and it gets no exclusive-time
// finding ("49 ms per update outside its children, 401 % of the update").
TEST(Regions, ARegionSpanningUpdatesIsNamedAndNotPricedPerUpdate) {
  Builder b;
  for (int step = 1; step <= 5; ++step) {
    auto& u = b.add(step, 12);
    b.region(u, "step", std::nullopt, 11.0);
    if (step == 5) b.region(u, "epoch", std::nullopt, 61.0);  // 5 updates' time, children 55 of it
  }
  const Hierarchy h = parse("epoch\n  step\n");
  const AnalysisInput in{b.d, &h};
  const Report r = build_report(in);
  ASSERT_EQ(r.regions.violations.size(), 1u);
  EXPECT_EQ(r.regions.violations[0].step, 5);
  EXPECT_EQ(r.regions.violations[0].longer_child, "epoch");
  EXPECT_DOUBLE_EQ(r.regions.violations[0].longer_child_ms, 61);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "nesting");
  EXPECT_NE(r.findings[0].action.find("epoch alone takes 61.0 ms in step 5, longer than that update"),
            std::string::npos)
      << r.findings[0].action;
  for (const auto& f : r.findings) EXPECT_FALSE(f.kind == "exclusive-time" && f.subject == "epoch") << f.title;
}

// A nesting 30,000 deep (each region the parent of the next, as a log's `parents` say):
// the walk over the nesting was recursive and overflowed the stack (a crafted trace).
TEST(Regions, ANestingThirtyThousandDeepIsWalkedWithoutRecursion) {
  Builder b;
  auto& u = b.add(1, 100.0);
  constexpr int kDepth = 30'000;
  for (int i = 0; i < kDepth; ++i) {
    b.region(u, "r" + std::to_string(i), std::nullopt, 50.0);
    u.regions.back().parent = i == 0 ? kTopLevel : u.regions[static_cast<std::size_t>(i - 1)].region;
  }
  Diagnostics diag;
  const auto h = hierarchy_from_log(b.d, diag);
  ASSERT_TRUE(h);
  const RegionTable t = analyze_regions({b.d, &*h});
  ASSERT_EQ(t.rows.size(), static_cast<std::size_t>(kDepth));
  EXPECT_EQ(t.rows.front().name, "r0");
  EXPECT_EQ(t.rows.back().name, "r29999");
  EXPECT_EQ(t.rows.back().depth, kDepth - 1);
  EXPECT_DOUBLE_EQ(row(t, "r0").host_self_ms->median, 0.0);  // 50 - 50
}

// A parent named in `parents` but timed in no update (a region open across every
// update boundary, such as one around the whole training loop, is written only when it
// ends): the time outside every region was not computed at all. Its children are the
// top level now: 100 ms updates with k (10 ms) under the untimed "loop" leave 90 ms
// outside every region.
TEST(Regions, AParentTimedInNoUpdateLeavesItsChildrenAtTheTopLevel) {
  Builder b;
  const auto loop = b.d.regions.intern("loop");
  for (int step = 1; step <= 3; ++step) {
    auto& u = b.add(step, 100.0);
    b.region(u, "k", std::nullopt, 10.0);
    b.region(u, "m", std::nullopt, 4.0);
    u.regions[0].parent = loop;
    u.regions[1].parent = u.regions[0].region;
  }
  Diagnostics diag;
  const auto h = hierarchy_from_log(b.d, diag);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->find("loop"), nullptr);
  ASSERT_NE(h->find("k"), nullptr);
  EXPECT_EQ(h->find("k")->parent, "");
  EXPECT_EQ(h->find("m")->parent, "k");
  EXPECT_EQ(diag.count(Severity::kNote), 1u);
  const RegionTable t = analyze_regions({b.d, &*h});
  ASSERT_TRUE(t.outside_regions_ms);
  EXPECT_DOUBLE_EQ(t.outside_regions_ms->median, 90.0);
  EXPECT_DOUBLE_EQ(row(t, "k").host_self_ms->median, 6.0);  // 10 - 4
  EXPECT_EQ(row(t, "k").depth, 0);
}

// A log timed on the device only (no host time in any region): how much of the update its
// regions cover on the host is not known, so no time is "outside every region" (it was
// the whole update, and the first finding said 100 % of it was untracked). An update
// that lists no top-level region at all is still wholly outside them; updates with host
// times keep theirs.
TEST(Regions, DeviceOnlyTopLevelRegionsLeaveTheTimeOutsideThemUnknown) {
  Builder b;
  for (int step = 1; step <= 4; ++step) {
    auto& u = b.add(step, 100.0);
    b.region(u, "work", 80.0, std::nullopt);
    b.region(u, "comm", 15.0, std::nullopt);
  }
  const Hierarchy h = parse("work\ncomm\n");
  const Report r = build_report({b.d, &h});
  EXPECT_FALSE(r.regions.outside_regions_ms.has_value());
  EXPECT_EQ(std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) { return f.kind == "untracked-time"; }),
            r.findings.end());

  b.add(5, 50.0);  // no region: 50 ms outside them
  auto& timed = b.add(6, 100.0);
  b.region(timed, "work", 80.0, 70.0);  // host times: 100 - 70 - 0 (comm has none) = 30 ms
  b.region(timed, "comm", 15.0, std::nullopt);
  const RegionTable t = analyze_regions({b.d, &h});
  ASSERT_TRUE(t.outside_regions_ms);
  EXPECT_EQ(t.outside_regions_ms->n, 2u);
  EXPECT_DOUBLE_EQ(t.outside_regions_ms->min, 30.0);
  EXPECT_DOUBLE_EQ(t.outside_regions_ms->max, 50.0);
  std::vector<NameTable::Id> top{*b.d.regions.find("work"), *b.d.regions.find("comm")};
  EXPECT_FALSE(outside_regions_ms(b.d.ranks[0].updates[0], top).has_value());
  EXPECT_EQ(outside_regions_ms(b.d.ranks[0].updates[4], top), 50.0);
  EXPECT_EQ(outside_regions_ms(b.d.ranks[0].updates[5], top), 30.0);
}

// Some updates timed on the device and others on the host only (a rank or thread with
// device timing off): the exclusive-time finding took the median over the device-timed
// updates alone, while its share counted every update. Both are now on the same basis:
// each update's device self time where it has one, else its host self time.
TEST(Regions, TheExclusiveTimeFindingCountsHostOnlyUpdatesToo) {
  Builder b;
  auto& u1 = b.add(1, 100.0);
  b.region(u1, "a", 50.0, 52.0);  // device self 50 - 20 = 30
  b.region(u1, "b", 20.0, 21.0);
  auto& u2 = b.add(2, 100.0);
  b.region(u2, "a", std::nullopt, 80.0);  // host self 80 - 10 = 70
  b.region(u2, "b", std::nullopt, 10.0);
  auto& u3 = b.add(3, 100.0);
  b.region(u3, "a", std::nullopt, 90.0);  // host self 90 - 10 = 80
  b.region(u3, "b", std::nullopt, 10.0);
  for (auto& u : b.d.ranks[0].updates) u.regions[1].parent = u.regions[0].region;
  const Hierarchy h = parse("a\n  b\n");
  const Report r = build_report({b.d, &h});
  const RegionRow& a = row(r.regions, "a");
  ASSERT_TRUE(a.device_self_ms && a.self_ms);
  EXPECT_DOUBLE_EQ(a.device_self_ms->median, 30.0);
  EXPECT_DOUBLE_EQ(a.self_ms->median, 70.0);
  EXPECT_DOUBLE_EQ(a.self_share.value_or(-1), (30.0 + 70.0 + 80.0) / 300.0);
  const auto f = std::find_if(r.findings.begin(), r.findings.end(),
                              [](const Finding& x) { return x.kind == "exclusive-time" && x.subject == "a"; });
  ASSERT_NE(f, r.findings.end());
  EXPECT_DOUBLE_EQ(f->ms_per_update, 70.0);
  EXPECT_NE(f->title.find("70.0 ms per update"), std::string::npos) << f->title;
}

// A child timed on the host only (here in every update; a thread without device timing)
// under a device-timed parent: its time stayed in the parent's exclusive device time
// (100 - 30 = 70 ms, where the parent's own work is 10 ms). The device self time is not
// known there; the exclusive time is the host one (101 - 31 - 60 = 10 ms). Subtracting
// the child's host time from the device time instead (a review found) made nesting
// violations out of a parent whose device time is below its host time.
TEST(Regions, AChildWithHostTimeOnlyLeavesItsParentsDeviceSelfTimeUnknown) {
  Builder b;
  for (int step = 1; step <= 3; ++step)
    b.family(b.add(step, 120.0), {"f", 100.0, 101.0}, {{"a", 30.0, 31.0}, {"v", std::nullopt, 60.0}});
  const Hierarchy h = parse("f\n  a\n  v\n");
  const RegionTable t = analyze_regions({b.d, &h});
  const RegionRow& f = row(t, "f");
  ASSERT_TRUE(f.host_self_ms && f.self_ms);
  EXPECT_FALSE(f.device_self_ms.has_value());
  EXPECT_DOUBLE_EQ(f.host_self_ms->median, 101.0 - 31.0 - 60.0);
  EXPECT_DOUBLE_EQ(f.self_ms->median, 10.0);
  EXPECT_DOUBLE_EQ(f.self_share.value_or(-1), 30.0 / 360.0);
  EXPECT_TRUE(t.violations.empty());
  const auto f_id = *b.d.regions.find("f");
  const std::vector<NameTable::Id> kids{*b.d.regions.find("a"), *b.d.regions.find("v")};
  const UpdateRecord& u = b.d.ranks[0].updates[0];
  EXPECT_FALSE(self_ms(u, f_id, kids, true).has_value());
  EXPECT_EQ(self_ms(u, f_id, kids, false), 10.0);
  EXPECT_EQ(self_ms(u, f_id, {kids[0]}, true), 70.0);  // (without the host-only child)
  // A parent whose device time is below its host time (the GPU behind when it was
  // entered) and a host-only child that fits the host time: no violation on either clock.
  Builder c;
  for (int step = 1; step <= 3; ++step)
    c.family(c.add(step, 120.0), {"step", 60.0, 90.0}, {{"fwd", 40.0, 30.0}, {"decode", std::nullopt, 45.0}});
  const Hierarchy hc = parse("step\n  fwd\n  decode\n");
  EXPECT_TRUE(analyze_regions({c.d, &hc}).violations.empty());
}

// What an update's slow paths took beyond the fast path's cost for the same work: a
// path costing 50 ms per frame beside a fast one at 20 ms per frame, 100 ms of it is 60 ms
// beyond (100 x (1 - 20/50)); the fast path's own time, a path as cheap as it, and a
// group without a slow path add nothing.
TEST(CodePaths, PathExcessIsTheSlowPathsTimeBeyondTheFastCost) {
  Builder b;
  auto& u = b.add(1, 500.0);
  b.region(u, "fast", 40.0, 41.0);  // 2 frames: 20 ms per frame
  b.counter(u, "fast_frames", 2);
  b.region(u, "slow", 100.0, 101.0);  // 2 frames (and 1 below): 150 / 3 = 50 ms per frame
  b.counter(u, "slow_frames", 2);
  b.region(u, "cheap", 40.0, 40.0);  // 2 frames: 20 ms per frame, as the fast path
  b.counter(u, "cheap_frames", 2);
  b.region(u, "other", 40.0, 40.0);  // 20 and 21 ms per frame: within 10 %, no slow path
  b.counter(u, "other_frames", 2);
  b.region(u, "other2", 42.0, 42.0);
  b.counter(u, "other2_frames", 2);
  auto& host_only = b.add(2, 500.0);
  b.region(host_only, "slow", std::nullopt, 50.0);  // (device timing off: its host time)
  b.counter(host_only, "slow_frames", 1);
  const Hierarchy h = parse("a\n  fast alt=g\n  slow alt=g\n  cheap alt=g\nb\n  other alt=h\n  other2 alt=h\n");
  const CodePathResult paths = analyze_code_paths({b.d, &h});
  ASSERT_EQ(paths.groups.size(), 2u);
  EXPECT_EQ(paths.groups[0].slow, "slow");
  EXPECT_TRUE(paths.groups[1].similar_cost);
  EXPECT_DOUBLE_EQ(path_excess_ms(paths, 0), 60.0);
  EXPECT_DOUBLE_EQ(path_excess_ms(paths, 1), 30.0);  // 50 x (1 - 20/50)
  EXPECT_DOUBLE_EQ(path_excess_ms(paths, 2), 0.0);   // (no such update)

  // Only paths within 10 % of each other: no update has an excess.
  Builder similar;
  auto& v = similar.add(1, 500.0);
  similar.region(v, "other", 40.0, 40.0);
  similar.counter(v, "other_frames", 2);
  similar.region(v, "other2", 42.0, 42.0);
  similar.counter(v, "other2_frames", 2);
  const CodePathResult none = analyze_code_paths({similar.d, &h});
  EXPECT_TRUE(none.update_excess_ms.empty());
  EXPECT_DOUBLE_EQ(path_excess_ms(none, 0), 0.0);
}

TEST(Regions, EveryRegionOfTheNestingThatIsNotInTheLogIsNamed) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, "a", 10.0, 10.0);
  // "gone" and both regions below it never occur; "half" is shown for its child "b".
  const Hierarchy h = parse("a\ngone\n  x\n    y\nhalf\n  b\n  z\n");
  b.region(u, "b", 5.0, 5.0);
  const RegionTable t = analyze_regions({b.d, &h});
  EXPECT_EQ(t.not_in_log, (std::vector<std::string>{"gone", "x", "y", "half", "z"}));
  std::vector<std::string> rows;
  for (const auto& r : t.rows) rows.push_back(r.name);
  EXPECT_EQ(rows, (std::vector<std::string>{"a", "b"}));
}

TEST(Regions, WithoutNestingNoSelfTimeAndSortedByShare) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, "small", 10.0, 10.0);
  b.region(u, "big", 60.0, 60.0);
  const RegionTable t = analyze_regions({b.d, nullptr});
  EXPECT_FALSE(t.nesting_known);
  EXPECT_EQ(t.rows[0].name, "big");
  EXPECT_FALSE(t.rows[0].device_self_ms.has_value());
  EXPECT_FALSE(t.outside_regions_ms.has_value());
}

TEST(Regions, DeviceHostGap) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, "async", 50.0, 5.0);   // gap 45 > max(1, 10): device longer
  b.region(u, "hostly", 2.0, 30.0);  // gap -28 > max(1, 6): host longer
  b.region(u, "even", 20.0, 19.5);   // gap 0.5: fine
  const RegionTable t = analyze_regions({b.d, nullptr});
  EXPECT_EQ(row(t, "async").gap, TimeGap::kDeviceLonger);
  EXPECT_EQ(row(t, "hostly").gap, TimeGap::kHostLonger);
  EXPECT_EQ(row(t, "even").gap, TimeGap::kNone);
}

TEST(CodePaths, CostPerFrameCauseAndSaving) {
  Builder b;
  // Update 1: fast path only, 8 samples x 9 frames = 72 frames, 720 ms -> 10 ms/frame.
  auto& u1 = b.add(1, 1000);
  b.region(u1, "fast", 720.0, 720.0);
  b.counter(u1, "fast_frames", 72);
  b.counter(u1, "fast_samples", 8);
  u1.frame_histogram = {{9, 8}};
  // Update 2: slow path only, 8 samples, 60 frames, 1800 ms -> 30 ms/frame.
  auto& u2 = b.add(2, 2000);
  b.region(u2, "slow", 1800.0, 1800.0, 8);
  b.counter(u2, "slow_frames", 60);
  b.counter(u2, "slow_samples", 8);
  u2.frame_histogram = {{9, 4}, {6, 4}};
  const Hierarchy h = parse("geo\n  fast alt=g\n  slow alt=g\n");
  const CodePathResult r = analyze_code_paths({b.d, &h});
  ASSERT_EQ(r.groups.size(), 1u);
  const PathGroup& g = r.groups[0];
  EXPECT_EQ(g.fast, "fast");
  EXPECT_EQ(g.slow, "slow");
  EXPECT_EQ(g.unit, "frame");
  EXPECT_DOUBLE_EQ(*g.paths[0].ms_per_frame, 10);
  EXPECT_DOUBLE_EQ(*g.paths[1].ms_per_frame, 30);
  EXPECT_DOUBLE_EQ(*g.paths[1].ms_per_sample, 225);
  EXPECT_DOUBLE_EQ(*g.slow_over_fast, 3);
  EXPECT_EQ(g.updates_with_slow, 1u);
  EXPECT_EQ(g.updates_fast_only, 1u);
  EXPECT_EQ(g.slow_updates_mixed_frames, 1u);
  EXPECT_EQ(g.fast_only_updates_mixed_frames, 0u);
  EXPECT_EQ(g.frame_counts_only_with_slow, (std::vector<std::int64_t>{6}));
  // Saving: (1800 - 60 x 10) / 2 updates = 600 ms per update.
  EXPECT_DOUBLE_EQ(*g.saving_ms_per_update, 600);
}

// The slow-path finding's advice: grouping or padding frames only where frame counts
// tell the slow-path updates apart. Ten updates, slow path on even steps; frame counts
// either the same in every update (3 frames x 2 samples) or mixed exactly in the
// slow-path updates.
// `slow_mixed` of the 5 slow-path updates and `fast_mixed` of the 5 fast-only ones have
// 2 and 4 frames, the others 3 and 3: no frame count comes only with the slow path.
std::string slow_path_action(int slow_mixed, int fast_mixed) {
  Builder b;
  for (int step = 0; step < 10; ++step) {
    const bool slow = step % 2 == 0;
    auto& u = b.add(step, 100);
    b.region(u, slow ? "slow" : "fast", slow ? 30.0 : 12.0, slow ? 30.0 : 12.0);
    b.counter(u, slow ? "slow_frames" : "fast_frames", 6);
    b.counter(u, slow ? "slow_samples" : "fast_samples", 2);
    const bool mixed = step / 2 < (slow ? slow_mixed : fast_mixed);
    u.frame_histogram = mixed ? std::vector<std::pair<std::int64_t, std::int64_t>>{{2, 1}, {4, 1}}
                              : std::vector<std::pair<std::int64_t, std::int64_t>>{{3, 2}};
  }
  const Hierarchy h = parse("geo\n  fast alt=g\n  slow alt=g\n");
  const Report r = build_report({b.d, &h});
  for (const auto& f : r.findings)
    if (f.kind == "slow-path") return f.action;
  ADD_FAILURE() << "no slow-path finding";
  return {};
}

TEST(Findings, SlowPathAdvisesOnFramesOnlyWhenFrameCountsTellItsUpdatesApart) {
  for (const auto& [slow_mixed, fast_mixed] : {std::pair{0, 0}, std::pair{2, 2}, std::pair{1, 3}}) {
    const std::string action = slow_path_action(slow_mixed, fast_mixed);
    EXPECT_EQ(action.find("group samples by frame count"), std::string::npos) << action;
    EXPECT_NE(action.find("frame counts do not tell the updates that ran slow from the others"), std::string::npos)
        << action;
  }
  // Mixed more often with the slow path (4 of 5 against 1 of 5), with no frame count
  // only with it: frames explain it.
  const std::string mixed = slow_path_action(4, 1);
  EXPECT_NE(mixed.find("group samples by frame count"), std::string::npos) << mixed;
}

// With gradient accumulation every update can mix frame counts (uniform micro-batches of
// 2 and of 4 frames), whichever path ran: the per-micro-batch detail tells the slow path's
// micro-batches apart. Ten updates of two micro-batches: on even steps one of 2 + 2 frames
// takes the fast path and one of 2 + 4 the slow path; on odd steps 2 + 2 and 4 + 4 take the
// fast path. Per update, all 5 slow-path updates and all 5 others are mixed; per
// micro-batch, the 5 slow ones are and none of the 15 fast ones.
TEST(Findings, SlowPathMixingIsJudgedPerMicroBatchWhereTheDetailSaysWhichPathEachTook) {
  Builder b;
  for (int step = 0; step < 10; ++step) {
    auto& u = b.add(step, 100);
    const NameTable::Id fast = b.d.regions.intern("fast"), slow = b.d.regions.intern("slow");
    auto mb = [](NameTable::Id path, std::vector<std::int64_t> frames) {
      MicroBatch m;
      m.path = path;
      m.frames = std::move(frames);
      return m;
    };
    if (step % 2 == 0) {
      b.region(u, "fast", 8.0, 8.0);   // 4 frames at 2 ms
      b.region(u, "slow", 36.0, 36.0);  // 6 frames at 6 ms
      u.microbatches = {mb(fast, {2, 2}), mb(slow, {2, 4})};
      u.frame_histogram = {{2, 3}, {4, 1}};
    } else {
      b.region(u, "fast", 24.0, 24.0);  // 12 frames at 2 ms
      u.microbatches = {mb(fast, {2, 2}), mb(fast, {4, 4})};
      u.frame_histogram = {{2, 2}, {4, 2}};
    }
  }
  const Hierarchy h = parse("geo\n  fast alt=g\n  slow alt=g\n");
  const Report r = build_report({b.d, &h});
  ASSERT_EQ(r.paths.groups.size(), 1u);
  const PathGroup& g = r.paths.groups[0];
  ASSERT_EQ(g.slow, "slow");
  EXPECT_EQ(g.slow_updates_mixed_frames, 5u);  // (per update: every update mixed)
  EXPECT_EQ(g.fast_only_updates_mixed_frames, 5u);
  ASSERT_TRUE(g.microbatch_mixing.has_value());
  EXPECT_EQ(g.microbatch_mixing->slow, 5u);
  EXPECT_EQ(g.microbatch_mixing->fast, 15u);
  EXPECT_EQ(g.microbatch_mixing->slow_mixed, 5u);
  EXPECT_EQ(g.microbatch_mixing->fast_mixed, 0u);
  EXPECT_TRUE(g.microbatch_mixing->frame_counts_only_with_slow.empty());  // (2 and 4 frames in fast ones too)
  const Finding* f = finding_of(r, "slow-path");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->action.find("group samples by frame count"), std::string::npos) << f->action;
  EXPECT_NE(f->evidence.find("5 of 5 micro-batches that took it mixed frame counts, 0 of 15 that took fast did"),
            std::string::npos)
      << f->evidence;
}

// The slow-path finding on ten updates, slow path in every third (30 ms against 10 for 2
// samples), with work counted in samples; with `frames_without_path`, each update's one
// micro-batch lists frames (3 and 5 with the slow path, 3 and 3 otherwise) but no path.
Finding slow_path_finding(bool frames_without_path) {
  Builder b;
  for (int step = 0; step < 10; ++step) {
    const bool slow = step % 3 == 0;
    auto& u = b.add(step, 100);
    b.region(u, slow ? "slow" : "fast", slow ? 30.0 : 10.0, slow ? 30.0 : 10.0);
    b.counter(u, slow ? "slow_samples" : "fast_samples", 2);
    if (frames_without_path) {
      MicroBatch mb;
      mb.frames = {3, slow ? 5 : 3};
      u.microbatches = {mb};
    }
  }
  const Hierarchy h = parse("geo\n  fast alt=g\n  slow alt=g\n");
  const Report r = build_report({b.d, &h});
  const Finding* f = finding_of(r, "slow-path");
  EXPECT_NE(f, nullptr);
  return f ? *f : Finding{};
}

// A log with no frame counts at all (work counted in samples): the slow-path finding says
// nothing about mixing and does not advise on frames.
TEST(Findings, SlowPathWithoutFrameCountsGivesNoFrameAdvice) {
  const Finding f = slow_path_finding(false);
  EXPECT_EQ(f.evidence.find("mixed"), std::string::npos) << f.evidence;
  EXPECT_EQ(f.action.find("group samples by frame count"), std::string::npos) << f.action;
  EXPECT_NE(f.action.find("the log has no frame counts"), std::string::npos) << f.action;
}

// Slow steps that are the ones that ran the slow path, the first among them slower by a
// hair: the variability finding sent step 0 to warm-up ("call begin_update()") and said
// to look at what makes the slow path slower there, where it only ran there (a helper's
// log). Now it points at the slow-path finding; with step 0 far out, warm-up leads.
TEST(Findings, VariabilityFromASlowPathPointsThereAndWarmUpOnlyWhereTheFirstStandsOut) {
  auto variability = [](double first_extra_ms) {
    Builder b;
    for (int step = 0; step < 20; ++step) {
      const bool slow = step % 3 == 0;
      auto& u = b.add(step, (slow ? 8.1 : 2.1) + (step == 0 ? first_extra_ms : 0.0));
      b.region(u, slow ? "slow" : "fast", slow ? 8.0 : 2.0, slow ? 8.0 : 2.0);
      b.counter(u, slow ? "slow_samples" : "fast_samples", 4);
    }
    const Hierarchy h = parse("m\n  fast alt=g\n  slow alt=g\n");
    const Report r = build_report({b.d, &h});
    const Finding* f = finding_of(r, "variability");
    EXPECT_NE(f, nullptr);
    return f ? *f : Finding{};
  };
  const Finding hair = variability(0.4);  // 8.5 against 8.1 ms
  EXPECT_EQ(hair.action.find("begin_update()"), std::string::npos) << hair.action;
  EXPECT_NE(hair.action.find("those steps ran the slow path slow"), std::string::npos) << hair.action;
  EXPECT_NE(hair.evidence.find("the slowest by little (8.5 against 8.1 ms for the next)"), std::string::npos)
      << hair.evidence;
  const Finding warm = variability(60.0);
  EXPECT_NE(warm.action.find("begin_update()"), std::string::npos) << warm.action;
  EXPECT_NE(warm.evidence.find("step 0 is the logs' first update, and the slowest"), std::string::npos) << warm.evidence;
}

// A slow path that runs in every update and is slower in some: the steps are slow because
// the path got slower there, not because they ran it (a review). And a wait that grew (a
// pipeline's recv inside the communication region) is a wait, not the region's inputs.
TEST(Findings, VariabilityOfAPathThatAlwaysRunsOrOfAWaitIsSaidSo) {
  {
    Builder b;
    for (int step = 0; step < 40; ++step) {
      const bool spike = step % 13 == 5;
      auto& u = b.add(step, spike ? 9.0 : 5.0);
      b.region(u, "slow", spike ? 8.0 : 4.0, spike ? 8.0 : 4.0);
      b.counter(u, "slow_samples", 4);
      if (step % 2 == 0) {
        b.region(u, "fast", 1.0, 1.0);
        b.counter(u, "fast_samples", 4);
      }
    }
    const Hierarchy h = parse("m\n  fast alt=g\n  slow alt=g\n");
    const Report r = build_report({b.d, &h});
    const Finding* f = finding_of(r, "variability");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->action.find("look at what makes slow slower"), std::string::npos) << f->action;
  }
  {
    Builder b;
    for (int step = 0; step < 40; ++step) {
      const bool late = step % 13 == 5;
      auto& u = b.add(step, late ? 150.0 : 100.0);
      b.region(u, "compute", 60.0, 60.0);
      b.region(u, "pipeline_comm", late ? 90.0 : 40.0, late ? 90.0 : 40.0);
      b.region(u, "recv", late ? 85.0 : 35.0, late ? 85.0 : 35.0);
    }
    const Hierarchy h = parse("compute\npipeline_comm role=communication\n  recv\n");
    const Report r = build_report({b.d, &h});
    const Finding* f = finding_of(r, "variability");
    ASSERT_NE(f, nullptr);
    // (One rank's log: the finding says whom to look for with every rank's log.)
    EXPECT_NE(f->action.find("waited"), std::string::npos) << f->action;
    EXPECT_EQ(f->action.find("its inputs"), std::string::npos) << f->action;
  }
}

// Frame counts only in micro-batches that name no path: the slow-path finding does not
// say the log has none (a review), and gives no frame advice.
TEST(Findings, SlowPathWithFramesInMicroBatchesWithoutPathsSaysSo) {
  const Finding f = slow_path_finding(true);
  EXPECT_EQ(f.action.find("the log has no frame counts"), std::string::npos) << f.action;
  EXPECT_NE(f.action.find("do not say which path they took"), std::string::npos) << f.action;
  EXPECT_EQ(f.action.find("group samples by frame count"), std::string::npos) << f.action;
}

// Data loading on one of four ranks (a pipeline's first stage) that stalls by 120 ms in 2
// of 20 steps: each step waits for that rank, so the stalls cost 2 x 120 / 20 = 12 ms per
// step beyond the 2 ms it always takes (14 ms at the slowest rank on average). Pooled over
// every rank's updates the mean was 3.5 ms against a median of 2, under the stall rule
// (a helper's 16-rank pipeline: priced at 2 ms against 15.7 measured).
TEST(Findings, DataLoadingOnOneRankIsPricedPerStepAtTheSlowestRank) {
  Builder b(4);
  for (int step = 0; step < 20; ++step)
    for (int rank = 0; rank < 4; ++rank) {
      const double stall = rank == 0 && step % 10 == 5 ? 120.0 : 0.0;
      auto& u = b.add(step, 300.0 + stall, rank);
      b.region(u, "compute", 200.0, 200.0);
      if (rank == 0) b.region(u, "load", 2.0 + stall, 2.0 + stall);
    }
  const Hierarchy h = parse("load role=data\ncompute\n");
  const Report r = build_report({b.d, &h});
  const Finding* f = finding_of(r, "data-loading");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->ms_per_update, (18 * 2.0 + 2 * 122.0) / 20);  // 14
  EXPECT_NE(f->title.find("per step at the slowest rank on average"), std::string::npos) << f->title;
}

// Exposed communication in some updates only (NCCL in one of four profiled steps, as
// when prof.step() marks micro-batches): its time at stake is the window's mean, the
// others counting 0: 10 ms / 4 = 2.5 ms per update, not the 10 ms median of the one.
// In every update, the median (here 4 updates of 6, 6, 8, 12 ms: 7 ms).
TEST(Findings, ExposedCommunicationInSomeUpdatesIsPricedOverTheWindow) {
  auto exposed_ms = [](const std::vector<std::optional<double>>& exposed) {
    Builder b;
    for (std::size_t k = 0; k < exposed.size(); ++k) {
      auto& u = b.add(static_cast<std::int64_t>(k), 75);
      b.region(u, "compute", 40.0, 40.0);
      if (exposed[k]) {
        b.region(u, "nccl", 20.0, 1.0);
        b.region(u, "nccl_exposed", *exposed[k], std::nullopt);
      }
    }
    const Report r = build_report({b.d, nullptr});
    for (const auto& f : r.findings)
      if (f.kind == "exposed-communication") return f.ms_per_update;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(exposed_ms({std::nullopt, 10.0, std::nullopt, std::nullopt}), 2.5);
  EXPECT_DOUBLE_EQ(exposed_ms({6.0, 12.0, 8.0, 6.0}), 7.0);
}

// A group's parent is the nearest region above it that the log has: "geo_wrap", a
// --hierarchy wrapper the log never times, was named ("group g (in geo_wrap)").
TEST(CodePaths, TheGroupsParentIsOneTheLogHas) {
  Builder b;
  auto& u = b.add(1, 1000);
  b.region(u, "step", 900.0, 900.0);
  b.region(u, "fast", 720.0, 720.0);
  const Hierarchy wrapped = parse("step\n  geo_wrap\n    fast alt=g\n    slow alt=g\n");
  EXPECT_EQ(analyze_code_paths({b.d, &wrapped}).groups.at(0).parent, "step");
  const Hierarchy top = parse("geo_wrap\n  fast alt=g\n  slow alt=g\n");
  EXPECT_EQ(analyze_code_paths({b.d, &top}).groups.at(0).parent, "");
  b.region(u, "geo_wrap", 800.0, 800.0);
  EXPECT_EQ(analyze_code_paths({b.d, &wrapped}).groups.at(0).parent, "geo_wrap");
}

TEST(CodePaths, WithoutNestingSaysSo) {
  Builder b;
  b.add(1, 10);
  EXPECT_FALSE(analyze_code_paths({b.d, nullptr}).nesting_known);
}

TEST(Padding, TokenWeightedNotMeanOfFractions) {
  Builder b;
  // 1000 slots with 900 valid, 3000 slots with 1500 valid: 1 - 2400/4000 = 0.4
  // (the mean of the per-update fractions would be 0.3).
  auto& u1 = b.add(1, 1000);
  b.counter(u1, "token_slots", 1000);
  b.counter(u1, "valid_tokens", 900);
  auto& u2 = b.add(2, 1000);
  b.counter(u2, "token_slots", 3000);
  b.counter(u2, "valid_tokens", 1500);
  const PaddingResult p = analyze_padding({b.d, nullptr});
  ASSERT_TRUE(p.available);
  EXPECT_DOUBLE_EQ(p.fraction, 0.4);
  // 1600 padding slots over 2 s.
  EXPECT_DOUBLE_EQ(p.padding_slots_per_s.value_or(-1), 800);
  EXPECT_DOUBLE_EQ(p.padding_slots_per_update, 800);
}

// Token-bound regions are compute only. Token slots 1000..6000; "fwd" takes 0.1 ms per
// slot; "comm" (role=communication) and "load" (role=data) follow the slots just as
// closely, but waits and data fetching do not scale with this rank's tokens, so pricing
// padding with them would overstate it. Padding 10 % in every update: the cost is
// 0.1 x median(fwd) = 0.1 x 350 = 35 ms per update.
TEST(Padding, PricedWithComputeRegionsOnly) {
  Builder b;
  for (int i = 1; i <= 6; ++i) {
    const double slots = 1000.0 * i;
    auto& u = b.add(i, 2000);
    b.counter(u, "token_slots", slots);
    b.counter(u, "valid_tokens", 0.9 * slots);
    b.region(u, "fwd", slots / 10, slots / 10);
    b.region(u, "comm", 50 + slots / 20, 50 + slots / 20);
    b.region(u, "load", 5 + slots / 100, 5 + slots / 100);
  }
  const Hierarchy h = parse("step\n  load role=data\n  fwd\n  comm role=communication\n");
  const PaddingResult p = analyze_padding({b.d, &h});
  ASSERT_EQ(p.token_bound.size(), 1u);
  EXPECT_EQ(p.token_bound[0].region, "fwd");
  ASSERT_TRUE(p.cost_ms_per_update);
  EXPECT_NEAR(*p.cost_ms_per_update, 35, 1e-9);
}

// An update that logged neither token counter had no token count, not zero tokens
// (docs/log-schema.md: absent is not 0). Five updates of 1000..5000 slots with 10 %
// padding, "fwd" 0.1 ms per slot, and a sixth without the counters whose "fwd" took
// 500 ms. Over the five: 1500 padding slots, 300 per update, 150 per second of their
// 10 s; fwd follows the slots exactly (r = 1), median 300 ms, cost 0.1 x 300 = 30 ms.
// Read as 0 slots, the sixth made r = 0.33 (no token-bound region) and the figures
// 250 per update and 125 per second.
TEST(Padding, UpdateWithoutTokenCountersIsLeftOut) {
  Builder b;
  for (int i = 1; i <= 6; ++i) {
    auto& u = b.add(i, 2000);
    if (i == 6) {
      b.region(u, "fwd", 500, 500);
      continue;
    }
    const double slots = 1000.0 * i;
    b.counter(u, "token_slots", slots);
    b.counter(u, "valid_tokens", 0.9 * slots);
    b.region(u, "fwd", slots / 10, slots / 10);
  }
  const Hierarchy h = parse("step\n  fwd\n");
  const PaddingResult p = analyze_padding({b.d, &h});
  ASSERT_TRUE(p.available);
  EXPECT_DOUBLE_EQ(p.padding_slots_per_update, 300);
  EXPECT_DOUBLE_EQ(p.padding_slots_per_s.value_or(-1), 150);
  ASSERT_TRUE(p.per_update_fraction);
  EXPECT_EQ(p.per_update_fraction->n, 5u);
  ASSERT_EQ(p.token_bound.size(), 1u);
  EXPECT_NEAR(p.token_bound[0].correlation, 1, 1e-12);
  EXPECT_DOUBLE_EQ(p.token_bound[0].median_ms, 300);
  ASSERT_TRUE(p.cost_ms_per_update);
  EXPECT_NEAR(*p.cost_ms_per_update, 30, 1e-9);
}

TEST(Waiting, CompensationIsDetected) {
  Builder b;
  // Compute varies 100..400; comm = 600 - compute + small noise: the sum stays ~600.
  const double compute[] = {100, 400, 250, 300, 150, 350};
  const double noise[] = {2, -1, 0, 1, -2, 1};
  for (int i = 0; i < 6; ++i) {
    auto& u = b.add(i, 700);
    b.region(u, "forward", compute[i], compute[i]);
    b.region(u, "grad_comm", 600 - compute[i] + noise[i], 600 - compute[i] + noise[i]);
  }
  const WaitingResult w = analyze_waiting({b.d, nullptr}, b.d.ranks[0]);
  EXPECT_EQ(w.comm_region, "grad_comm");
  EXPECT_EQ(w.comm_found_by, "region name");
  EXPECT_EQ(w.compute_region, "forward");
  EXPECT_LT(*w.correlation, -0.99);
  EXPECT_TRUE(w.waiting);
  // comm = {502, 199, 350, 301, 448, 251}; floor = 199; wait = comm - 199 =
  // {303, 0, 151, 102, 249, 52}, median (102 + 151) / 2 = 126.5.
  EXPECT_DOUBLE_EQ(w.comm_floor_ms, 199);
  EXPECT_DOUBLE_EQ(w.wait_ms->median, 126.5);
}

// Updates without device times (a thread or update with device timing off) are read on
// the host, as the cross-rank analysis reads them: they were left out of the wait (n 4
// of 6 here, and the floor taken from the others).
TEST(Waiting, UpdatesTimedOnTheHostOnlyCountInTheWait) {
  Builder b;
  const double compute[] = {100, 400, 250, 300, 150, 350};
  const double noise[] = {2, -1, 0, 1, -2, 1};
  for (int i = 0; i < 6; ++i) {
    auto& u = b.add(i, 700);
    const bool device = i != 1 && i != 3;  // the floor (199) is in update 1, host-only
    const double comm = 600 - compute[i] + noise[i];
    b.region(u, "forward", device ? std::optional(compute[i]) : std::nullopt, compute[i]);
    b.region(u, "grad_comm", device ? std::optional(comm) : std::nullopt, comm);
  }
  for (const bool indexed : {false, true}) {
    SCOPED_TRACE(indexed ? "through build_report (the index)" : "without the index");
    const WaitingResult w =
        indexed ? build_report({b.d, nullptr}).waiting.at(0) : analyze_waiting({b.d, nullptr}, b.d.ranks[0]);
    EXPECT_TRUE(w.waiting);
    ASSERT_TRUE(w.wait_ms);
    EXPECT_EQ(w.wait_ms->n, 6u);
    EXPECT_DOUBLE_EQ(w.comm_floor_ms, 199);  // as in CompensationIsDetected
    EXPECT_DOUBLE_EQ(w.wait_ms->median, 126.5);
  }
}

// A region with a role or on a background thread is not the compute: a data loader's
// region more anti-correlated with the communication than the forward pass was named
// the compute region (a helper's C++ engine). Without the nesting, roles are unknown.
TEST(Waiting, TheComputeRegionHasNoRole) {
  Builder b;
  const double compute[] = {100, 400, 250, 300, 150, 350};
  const double noise[] = {9, -7, 5, 8, -9, 6};
  for (int i = 0; i < 6; ++i) {
    auto& u = b.add(i, 700);
    b.region(u, "forward", compute[i], compute[i]);
    b.region(u, "grad_comm", 600 - compute[i] + noise[i], 600 - compute[i] + noise[i]);
    b.region(u, "loader", std::nullopt, compute[i] - noise[i]);         // r = -1 exactly: comm + it = 600
    b.region(u, "decode", std::nullopt, 0.5 * (compute[i] - noise[i]));  // under it: on its thread
    b.region(u, "opt", std::nullopt, 0.1 * (compute[i] - noise[i]));     // role=optimizer
    b.region(u, "opt_inner", std::nullopt, 0.05 * (compute[i] - noise[i]));  // under it
  }
  EXPECT_EQ(analyze_waiting({b.d, nullptr}, b.d.ranks[0]).compute_region, "loader");  // (the first of r = -1)
  const Hierarchy h = parse("forward\ngrad_comm\nopt role=optimizer\n  opt_inner\nloader role=background\n  decode\n");
  const WaitingResult w = analyze_waiting({b.d, &h}, b.d.ranks[0]);
  EXPECT_EQ(w.compute_region, "forward");
  EXPECT_GT(*w.correlation, -1 + 1e-6);
}

// Of near-equal candidates the shallowest is compared, counting only the regions the log
// has: a --hierarchy wrapper the log never times is no level. With one, "prep" (r -0.99916)
// was compared instead of "forward" (r -0.99992), both at the top of what the log has.
TEST(Waiting, AWrapperTheLogLacksIsNoLevelOfTheNesting) {
  Builder b;
  const double compute[] = {100, 400, 250, 300, 150, 350};
  const double noise[] = {2, -1, 0, 1, -2, 1};
  const double other[] = {-6, 5, -4, 7, 4, -5};
  for (int i = 0; i < 6; ++i) {
    auto& u = b.add(i, 700);
    b.region(u, "forward", compute[i], compute[i]);
    b.region(u, "prep", compute[i] + other[i], compute[i] + other[i]);
    b.region(u, "grad_comm", 600 - compute[i] + noise[i], 600 - compute[i] + noise[i]);
  }
  const Hierarchy flat = parse("forward\nprep\ngrad_comm\n");
  EXPECT_EQ(analyze_waiting({b.d, &flat}, b.d.ranks[0]).compute_region, "forward");
  const Hierarchy wrapped = parse("wrap\n  forward\nprep\ngrad_comm\n");
  EXPECT_EQ(analyze_waiting({b.d, &wrapped}, b.d.ranks[0]).compute_region, "forward");
  // (A wrapper the log has is a level: the top-level region is compared.)
  auto& u = b.d.ranks[0].updates[0];
  b.region(u, "wrap", 1000, 1000);
  EXPECT_EQ(analyze_waiting({b.d, &wrapped}, b.d.ranks[0]).compute_region, "prep");
}

TEST(Waiting, IndependentRegionsAreNotWaiting) {
  Builder b;
  const double compute[] = {100, 400, 250, 300, 150, 350};
  const double comm[] = {200, 260, 190, 240, 210, 230};  // rises with compute: r > 0
  for (int i = 0; i < 6; ++i) {
    auto& u = b.add(i, 700);
    b.region(u, "forward", compute[i], compute[i]);
    b.region(u, "allreduce", comm[i], comm[i]);
  }
  EXPECT_FALSE(analyze_waiting({b.d, nullptr}, b.d.ranks[0]).waiting);
}

TEST(UpdateTime, RatesPerRankAndJob) {
  Builder b;
  b.config(4, 8, 2);
  // Two updates of 2 s and 4 s, 16 samples and 32 frames each: 32 samples / 6 s.
  for (auto [step, wall] : {std::pair{1, 2000.0}, std::pair{2, 4000.0}}) {
    auto& u = b.add(step, wall);
    b.counter(u, "samples", 16);
    b.counter(u, "frames", 32);
  }
  const AnalysisInput in{b.d, nullptr};
  const RunSummary run = summarize_run(in);
  EXPECT_EQ(run.global_batch, 64);  // 8 x 2 x 4
  EXPECT_TRUE(run.global_batch_derived);
  EXPECT_EQ(run.missing_ranks, (std::vector<std::int64_t>{1, 2, 3}));
  const UpdateTimeResult t = analyze_update_time(in, run);
  EXPECT_DOUBLE_EQ(t.update_ms->median, 3000);
  EXPECT_DOUBLE_EQ(*t.samples.per_rank_per_s, 32.0 / 6.0);
  EXPECT_DOUBLE_EQ(*t.frames.per_rank_per_s, 64.0 / 6.0);
  EXPECT_TRUE(t.frames.job_estimated);
  EXPECT_DOUBLE_EQ(*t.frames.job_per_s, 4 * 64.0 / 6.0);
  EXPECT_DOUBLE_EQ(*t.global_samples_per_s, 64.0 * 2 / 6.0);
  EXPECT_FALSE(t.token_slots.per_rank_per_s.has_value());  // no such counter: unknown, not 0
  // 16 samples per update = micro_batch 8 x accumulation 2: nothing to say.
  EXPECT_FALSE(t.samples_per_update_counted.has_value());
}

// The README's own example counted 8 samples per update with 2 micro-batches of 8: the
// per-rank rate (8 per update) and the job's (global batch 16) disagreed 2x without a
// word (found by a fresh-user pass).
TEST(UpdateTime, ASamplesCounterThatIsNotTheConfigsBatchIsSaid) {
  Builder b;
  b.config(1, 8, 2);
  for (int step = 1; step <= 4; ++step) b.counter(b.add(step, 1000), "samples", step == 4 ? 4 : 8);
  const AnalysisInput in{b.d, nullptr};
  const UpdateTimeResult t = analyze_update_time(in, summarize_run(in));
  ASSERT_TRUE(t.samples_per_update_counted.has_value());
  EXPECT_DOUBLE_EQ(*t.samples_per_update_counted, 8);  // the median of 8, 8, 8, 4
  EXPECT_DOUBLE_EQ(*t.samples_per_update_config, 16);
  EXPECT_DOUBLE_EQ(*t.samples.per_rank_per_s, 28.0 / 4.0);
  EXPECT_DOUBLE_EQ(*t.global_samples_per_s, 16.0);
}

namespace {
// Three ranks, four updates; rank 2 does more own work in updates 1-3.
// own work = wall - comm.
Dataset three_ranks() {
  Dataset d;
  d.files = {"mem"};
  const double wall = 1000;
  // own work per (rank, step):
  const double work[3][4] = {{600, 610, 620, 700}, {580, 600, 640, 690}, {900, 950, 800, 650}};
  for (int r = 0; r < 3; ++r) {
    auto& log = d.ranks.emplace_back();
    log.rank = r;
    for (int s = 0; s < 4; ++s) {
      auto& u = log.updates.emplace_back();
      u.rank = r;
      u.step = s + 1;
      u.wall_ms = wall;
      u.regions.push_back({d.regions.intern("allreduce"), std::nullopt, wall - work[r][s], wall - work[r][s], 1});
    }
  }
  return d;
}
}  // namespace

TEST(CrossRank, SlowestRankWaitsAndScores) {
  const Dataset d = three_ranks();
  const CrossRankResult x = analyze_cross_rank({d, nullptr}, {}, 4);
  ASSERT_TRUE(x.available);
  EXPECT_EQ(x.comm_region, "allreduce");
  EXPECT_EQ(x.steps_aligned, 4u);
  EXPECT_EQ(x.ranks_missing, (std::vector<std::int64_t>{3}));
  ASSERT_EQ(x.per_update.size(), 4u);
  // Step 1: works 600, 580, 900 -> slowest rank 2, median 600, margin 300.
  EXPECT_EQ(x.per_update[0].slowest_rank, 2);
  EXPECT_DOUBLE_EQ(x.per_update[0].margin_ms, 300);
  // Step 4: 700, 690, 650 -> slowest rank 0, margin 10.
  EXPECT_EQ(x.per_update[3].slowest_rank, 0);
  EXPECT_DOUBLE_EQ(x.per_update[3].margin_ms, 10);
  const auto& r0 = x.per_rank[0];
  const auto& r2 = x.per_rank[2];
  EXPECT_EQ(r2.times_slowest, 3u);
  EXPECT_EQ(r0.times_slowest, 1u);
  // Rank 0 waits 900-600, 950-610, 800-620, 0 -> {300, 340, 180, 0}: median 240.
  EXPECT_DOUBLE_EQ(r0.wait_ms.median, 240);
  // Medians of own work: rank 0 615, rank 1 620, rank 2 850. Fastest = 615.
  EXPECT_DOUBLE_EQ(r2.compute_ms.median, 850);
  EXPECT_NEAR(r2.relative_score, 615.0 / 850.0, 1e-12);  // 0.72 < 0.75
  EXPECT_TRUE(r2.straggler);
  EXPECT_FALSE(r0.straggler);
  EXPECT_NEAR(r2.individual_score, 650.0 / 850.0, 1e-12);
  EXPECT_EQ(x.stragglers, (std::vector<std::int64_t>{2}));
}

// One or two steps (a profiler trace often holds one): rank 2's score is below 0.75
// (600 / 900 in step 1 alone) but a slow step is not a slow rank.
TEST(CrossRank, TooFewStepsFlagNoStraggler) {
  for (const std::size_t keep : {1u, 2u, 3u}) {
    Dataset d = three_ranks();
    for (auto& log : d.ranks) log.updates.resize(keep);
    const CrossRankResult x = analyze_cross_rank({d, nullptr}, {}, 4);
    ASSERT_TRUE(x.available);
    EXPECT_EQ(x.steps_aligned, keep);
    EXPECT_LT(x.per_rank[2].relative_score, 0.75);
    EXPECT_EQ(x.per_rank[2].straggler, keep >= kMinStragglerUpdates) << keep << " steps";
    EXPECT_EQ(x.stragglers.empty(), keep < kMinStragglerUpdates);
  }
}

TEST(CrossRank, IncompleteStepsAreReportedAndSkipped) {
  Dataset d = three_ranks();
  d.ranks[1].updates.pop_back();  // rank 1 lacks step 4
  const CrossRankResult x = analyze_cross_rank({d, nullptr}, {}, std::nullopt);
  EXPECT_EQ(x.steps_aligned, 3u);
  EXPECT_EQ(x.steps_incomplete, 1u);
  ASSERT_EQ(x.incomplete_examples.size(), 1u);
  EXPECT_EQ(x.incomplete_examples[0].first_step, 4);
  EXPECT_EQ(x.incomplete_examples[0].last_step, 4);
  EXPECT_EQ(x.incomplete_examples[0].ranks, (std::vector<std::int64_t>{1}));
  // A rank's row summarizes the steps compared, its communication time too: rank 0's
  // allreduce is 1000 - {600, 610, 620} = {400, 390, 380} over steps 1-3 (with step 4's
  // 300 it read n = 4, median 385, beside own work and waits of 3 steps).
  const auto& r0 = x.per_rank[0];
  EXPECT_EQ(r0.compute_ms.n, 3u);
  EXPECT_EQ(r0.wait_ms.n, 3u);
  ASSERT_TRUE(r0.comm_ms);
  EXPECT_EQ(r0.comm_ms->n, 3u);
  EXPECT_DOUBLE_EQ(r0.comm_ms->median, 390);
  EXPECT_DOUBLE_EQ(r0.comm_ms->min, 380);
}

TEST(CrossRank, IncompleteStepsAreListedAsRunsAndTheRestCounted) {
  // Three ranks, steps 1..60. Rank 2 lacks 5..15 (one run of 11), rank 1 lacks 20; then
  // rank 1 lacks every other step from 30 to 58: 15 runs of one step. The first 10 runs
  // are listed (5..15, 20, 30, 32, ..., 44); 11 + 1 + 8 = 20 of the 27 steps.
  Dataset d;
  d.files = {"mem"};
  const auto comm = d.regions.intern("allreduce");
  std::size_t expected_missing = 0;
  for (int r = 0; r < 3; ++r) {
    auto& log = d.ranks.emplace_back();
    log.rank = r;
    for (int s = 1; s <= 60; ++s) {
      const bool lacks = (r == 2 && s >= 5 && s <= 15) || (r == 1 && (s == 20 || (s >= 30 && s <= 58 && s % 2 == 0)));
      if (lacks) {
        ++expected_missing;
        continue;
      }
      auto& u = log.updates.emplace_back();
      u.rank = r;
      u.step = s;
      u.wall_ms = 1000;
      u.regions.push_back({comm, std::nullopt, 400.0 + r, 400.0 + r, 1});
    }
  }
  const CrossRankResult x = analyze_cross_rank({d, nullptr}, {}, std::nullopt);
  EXPECT_EQ(x.steps_incomplete, expected_missing);
  EXPECT_EQ(expected_missing, 27u);
  ASSERT_EQ(x.incomplete_examples.size(), 10u);
  EXPECT_EQ(x.incomplete_examples[0].first_step, 5);
  EXPECT_EQ(x.incomplete_examples[0].last_step, 15);
  EXPECT_EQ(x.incomplete_examples[0].steps, 11u);
  EXPECT_EQ(x.incomplete_examples[0].ranks, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(x.incomplete_examples[1].first_step, 20);
  EXPECT_EQ(x.incomplete_examples[1].steps, 1u);
  EXPECT_EQ(x.incomplete_examples[9].first_step, 44);
  EXPECT_EQ(x.incomplete_examples[9].ranks, (std::vector<std::int64_t>{1}));
  std::size_t listed = 0;
  for (const auto& run : x.incomplete_examples) listed += run.steps;
  EXPECT_EQ(listed, 20u);
}

// ranks_left_out (cross_rank.hpp), each case worked out by hand from its rules.
TEST(CrossRank, RanksLeftOutByHand) {
  auto range = [](std::int64_t from, std::int64_t to) {  // [from, to)
    std::vector<std::int64_t> v;
    for (std::int64_t s = from; s < to; ++s) v.push_back(s);
    return v;
  };
  using L = RankLeftOut;
  using Steps = std::vector<std::vector<std::int64_t>>;
  // 1 of 10 steps: under half, and three ranks remain.
  EXPECT_EQ(ranks_left_out(Steps{range(0, 10), range(0, 10), range(0, 10), {0}}),
            (std::vector<L>{L::kKept, L::kKept, L::kKept, L::kShort}));
  // An empty log is short too.
  EXPECT_EQ(ranks_left_out(Steps{range(0, 10), {}, range(0, 10)}), (std::vector<L>{L::kKept, L::kShort, L::kKept}));
  // Two ranks, one short: one would remain, so none is left out.
  EXPECT_EQ(ranks_left_out(Steps{range(0, 10), {3}}), (std::vector<L>{L::kKept, L::kKept}));
  // 8 ranks of 30 steps, rank 3 from step 12 (18 steps, not short): with it 18 steps are
  // aligned, without it 30; 7 x 30 = 210 > 8 x 18 = 144, a gain of 12 >= 3 and >= 30 / 10.
  Steps late(8, range(0, 30));
  late[3] = range(12, 30);
  std::vector<L> expect(8, L::kKept);
  expect[3] = L::kLate;
  EXPECT_EQ(ranks_left_out(late), expect);
  // From step 2: a gain of 2 steps, under 3: kept.
  late[3] = range(2, 30);
  EXPECT_EQ(ranks_left_out(late), std::vector<L>(8, L::kKept));
  // Two late ranks of 8: more than max(1, 8 / 10) = 1: both kept.
  late[3] = range(12, 30);
  late[2] = range(12, 30);
  EXPECT_EQ(ranks_left_out(late), std::vector<L>(8, L::kKept));
  // A log that starts late and ends early (12..27, 16 of 30 steps, not short), or lost a
  // step in the middle, is not a late start: kept.
  late[2] = range(0, 30);
  late[3] = range(12, 28);
  EXPECT_EQ(ranks_left_out(late), std::vector<L>(8, L::kKept));
  late[3] = range(0, 30);
  late[3].erase(late[3].begin() + 10);
  EXPECT_EQ(ranks_left_out(late), std::vector<L>(8, L::kKept));
  // A short log and a late one: the short one goes first, then the late one is judged
  // among the 8 others (30 steps: 7 x 30 > 8 x 18).
  late[3] = range(12, 30);
  late.push_back({29});
  expect.push_back(L::kShort);
  EXPECT_EQ(ranks_left_out(late), expect);
  // Lost records: 40 ranks of 20 steps, ranks 0..3 each without one step (2, 7, 11, 16),
  // rank 4 without steps 5 and 9, rank 5 without step 0 (a late start by one step), rank 6
  // without steps 18 and 19 (it stopped early: never left out for that). Aligned with all:
  // 20 - 9 = 11 steps, over half: every rank kept (a lost record costs its step).
  Steps lost(40, range(0, 20));
  auto drop = [&](std::size_t r, std::int64_t st) { std::erase(lost[r], st); };
  drop(0, 2), drop(1, 7), drop(2, 11), drop(3, 16), drop(4, 5), drop(4, 9), drop(5, 0), drop(6, 18), drop(6, 19);
  EXPECT_EQ(ranks_left_out(lost), std::vector<L>(40, L::kKept));
  // Ranks 7..15 lose one step each too (1, 3, 4, 6, 8, 10, 12, 13, 14): only steps 15 and
  // 17 lack no rank: aligned 2 of 20. Candidates lack at most max(1, 20 / 20) = 1 step:
  // not rank 4 (2 steps: a rank that loses many records is often the sick one), nor rank 6
  // (stopped early). Each candidate alone lacks 1 step; of equals the lowest index first
  // (0, 1, 2, 3, 5, 7, ...), at most max(1, 40 / 10) = 4. The products (40 - k) x aligned:
  // k=0: 80; k=1: 39 x 3 = 117; k=2: 38 x 4 = 152; k=3: 37 x 5 = 185; k=4: 36 x 6 = 216,
  // the most: a gain of 4 >= 3 and >= 20 / 10.
  const std::int64_t more[] = {1, 3, 4, 6, 8, 10, 12, 13, 14};
  for (std::size_t k = 0; k < 9; ++k) drop(7 + k, more[k]);
  std::vector<L> want(40, L::kKept);
  want[0] = want[1] = want[2] = want[3] = L::kLost;
  EXPECT_EQ(ranks_left_out(lost), want);
  // A late start by one step is kLate when it goes: rank 5 from step 1, ranks 6..16 each
  // without one of steps 2..12: aligned 8 of 20 (0, 2..12 lack a rank). Rank 5 is the
  // first of equals: 39 x 9, 38 x 10, 37 x 11, 36 x 12 = 432 > 40 x 8 = 320.
  Steps late2(40, range(0, 20));
  late2[5] = range(1, 20);
  for (std::size_t k = 0; k < 11; ++k) std::erase(late2[6 + k], static_cast<std::int64_t>(2 + k));
  std::vector<L> want2(40, L::kKept);
  want2[5] = L::kLate;
  want2[6] = want2[7] = want2[8] = L::kLost;
  EXPECT_EQ(ranks_left_out(late2), want2);
  // At most a tenth of the ranks with those the late rule left out: 20 ranks of 20 steps,
  // ranks 0, 1 from step 6 (late: without them 8 steps aligned against 2, 18 x 8 > 20 x
  // 2), ranks 2..13 each without one of steps 6..17. Among the 18 left, 8 of 20 steps are
  // aligned (under half), but max(1, 20 / 10) = 2 are out already: no more.
  Steps capped(20, range(0, 20));
  capped[0] = capped[1] = range(6, 20);
  for (std::size_t k = 0; k < 12; ++k) std::erase(capped[2 + k], static_cast<std::int64_t>(6 + k));
  std::vector<L> want3(20, L::kKept);
  want3[0] = want3[1] = L::kLate;
  EXPECT_EQ(ranks_left_out(capped), want3);
}

TEST(CrossRank, OneRankIsNotEnough) {
  Builder b;
  b.add(1, 10);
  const CrossRankResult x = analyze_cross_rank({b.d, nullptr}, {}, std::nullopt);
  EXPECT_FALSE(x.available);
  EXPECT_NE(x.why_not.find("one rank"), std::string::npos);
}

// Straggler episodes on margins built by hand (find_straggler_episodes, cross_rank.hpp).
// Steps 1..40, the median rank's own work 100 ms, margins 10 + (step - 1) mod 5 ms except:
// steps 10, 11, 12, 14, 15 -> 40..44 (rank 7), step 13 -> 70 (rank 9), step 30 -> 50
// (rank 2), steps 35, 36 -> 60, 61 (rank 4). The 31 other margins are 10 x6, 11 x7,
// 12 x7, 13 x7, 14 x4, so the 20th and 21st of the 40 sorted are 12 and 13: typical 12.5.
// Their deviations are 0.5 x14, 1.5 x11, 2.5 x6 (then the 9 large ones): MAD 1.5, and
// 3 x 1.4826 x 1.5 = 6.6717 is above 5 % of 100 ms, so the threshold is 19.1717 ms.
// Rank 7 is outlying at steps 10-12 and 14-15 (step 13, another rank's, is a gap of one):
// one episode, 6 updates, 5 behind, median margin 42, excess 210 - 5 x 12.5 = 147.5 ms.
// Ranks 9 and 2 (one update) and 4 (two) are below the 3 updates an episode needs.
TEST(StragglerEpisodes, FromMarginsBuiltByHand) {
  std::vector<UpdateSlowest> per_update;
  const auto add_quiet = [&](std::int64_t first, std::int64_t last) {  // the steady pattern above
    for (std::int64_t step = first; step <= last; ++step) {
      UpdateSlowest u;
      u.step = step;
      u.slowest_rank = step % 3;
      u.median_compute_ms = 100;
      u.margin_ms = 10 + static_cast<double>((step - 1) % 5);
      per_update.push_back(u);
    }
  };
  add_quiet(1, 40);
  const auto set = [&](std::int64_t step, std::int64_t rank, double margin) {
    per_update[static_cast<std::size_t>(step - 1)].slowest_rank = rank;
    per_update[static_cast<std::size_t>(step - 1)].margin_ms = margin;
  };
  set(10, 7, 40), set(11, 7, 41), set(12, 7, 42), set(14, 7, 43), set(15, 7, 44);
  set(13, 9, 70), set(30, 2, 50), set(35, 4, 60), set(36, 4, 61);
  double threshold = 0;
  const auto episodes = find_straggler_episodes(per_update, threshold);
  EXPECT_NEAR(threshold, 12.5 + 3 * 1.4826 * 1.5, 1e-9);
  ASSERT_EQ(episodes.size(), 1u);
  const StragglerEpisode& e = episodes[0];
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.first_step, 10);
  EXPECT_EQ(e.last_step, 15);
  EXPECT_EQ(e.updates, 6u);
  EXPECT_EQ(e.behind, 5u);
  EXPECT_DOUBLE_EQ(e.margin_ms, 42);
  EXPECT_DOUBLE_EQ(e.excess_ms, 147.5);

  // A gap of three other updates ends an episode: rank 7 at steps 10-12, then 16-18. In
  // 40 updates two runs of 3 are chance (rank 7 behind in 3 of the 37 updates outside
  // either: p = 4 / 39, p^3 x 40 = 4 % > 1 %), so the run goes on quietly to step 400.
  set(14, 0, 11), set(15, 1, 12), set(16, 7, 45), set(17, 7, 46), set(18, 7, 47);
  EXPECT_TRUE(find_straggler_episodes(per_update, threshold).empty());
  add_quiet(41, 400);
  const auto split = find_straggler_episodes(per_update, threshold);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(std::make_pair(split[0].first_step, split[0].last_step), std::make_pair(std::int64_t{10}, std::int64_t{12}));
  EXPECT_EQ(std::make_pair(split[1].first_step, split[1].last_step), std::make_pair(std::int64_t{16}, std::int64_t{18}));

  // Steady margins (MAD 0) need 5 % of the own work: 12 + 5 = 17 ms; nothing is behind.
  std::vector<UpdateSlowest> steady(10, UpdateSlowest{0, 1, 112, 100, 12});
  EXPECT_TRUE(find_straggler_episodes(steady, threshold).empty());
  EXPECT_DOUBLE_EQ(threshold, 17);
  EXPECT_TRUE(find_straggler_episodes({}, threshold).empty());
  EXPECT_EQ(threshold, 0);
}

// The second search's stretches (on own work less the slow paths' excess) put among the
// first search's (merge_paths_scaled_episodes, cross_rank.hpp), episodes built by hand.
TEST(StragglerEpisodes, PathsScaledStretchesReplaceOnlyShorterPiecesInsideThem) {
  const auto ep = [](std::int64_t rank, std::int64_t first, std::int64_t last, std::size_t among = 0) {
    StragglerEpisode e;
    e.rank = rank;
    e.first_step = first;
    e.last_step = last;
    e.updates = static_cast<std::size_t>(last - first + 1);
    e.among_ranks = among;
    return e;
  };
  const auto steps = [](const std::vector<StragglerEpisode>& v) {
    std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>> out;
    for (const auto& e : v) out.emplace_back(e.rank, e.first_step, e.last_step, e.paths_scaled);
    return out;
  };
  using T = std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>>;
  // Nothing of rank 3's found first: the scaled 100..119 is kept; a 9-update one is not.
  std::vector<StragglerEpisode> first{ep(5, 40, 45)};
  merge_paths_scaled_episodes(first, {ep(3, 100, 119), ep(4, 200, 208)});
  EXPECT_EQ(steps(first), (T{{5, 40, 45, false}, {3, 100, 119, true}}));
  // Pieces inside it covering 3 + 4 of its 20 steps: replaced. Another rank's episode in
  // the same steps and rank 3's piece among other ranks (among_ranks > 0) stay.
  first = {ep(3, 102, 104), ep(3, 110, 113), ep(6, 100, 119), ep(3, 105, 108, 2)};
  merge_paths_scaled_episodes(first, {ep(3, 100, 119)});
  EXPECT_EQ(steps(first), (T{{3, 100, 119, true}, {6, 100, 119, false}, {3, 105, 108, false}}));  // (step order, then rank)
  // A piece reaching outside it (95..104): the first search's stand.
  first = {ep(3, 95, 104), ep(3, 110, 113)};
  merge_paths_scaled_episodes(first, {ep(3, 100, 119)});
  EXPECT_EQ(steps(first), (T{{3, 95, 104, false}, {3, 110, 113, false}}));
  // Pieces covering every step of it (overlapping pieces 100..112 and 105..119): they stand.
  first = {ep(3, 100, 112), ep(3, 105, 119)};
  merge_paths_scaled_episodes(first, {ep(3, 100, 119)});
  EXPECT_EQ(steps(first), (T{{3, 100, 112, false}, {3, 105, 119, false}}));
  // Overlapping pieces counted once: 100..115 and 104..110 cover 16 of 20 steps (23 if
  // counted twice, which would have kept the pieces): replaced.
  first = {ep(3, 100, 115), ep(3, 104, 110)};
  merge_paths_scaled_episodes(first, {ep(3, 100, 119)});
  EXPECT_EQ(steps(first), (T{{3, 100, 119, true}}));
}

// Ranks that enter their steps apart and leave them together (find_window_skew,
// cross_rank.hpp). Ranks 0, 1, 2; starts are ms after T (a Unix time), walls in ms:
//   step A: starts 0, 5, 2;       walls 20, 15.5, 18   -> ends 20, 20.5, 20:    spreads 5, 0.5
//   step B: starts 100, 104, 101; walls 20, 16.2, 19   -> ends 120, 120.2, 120: spreads 4, 0.2
//   step C: starts 200, 201, 206; walls 25, 24, 19.4   -> ends 225, 225, 225.4: spreads 6, 0.4
//   step D: rank 2's start unknown: not counted.
// Medians: start spread 5, end spread 0.4, slowest wall 20: 5 >= 1 ms and 10 % of 20, and
// 0.4 <= 2.5. Rank 1 entered last in A and B, rank 2 in C; rank 0 first in all three.
TEST(StragglerEpisodes, RanksThatEnterTheirStepsApartAndLeaveTogether) {
  const double t = 1.7e12, nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> start{t + 0,   t + 5,   t + 2,   t + 100, t + 104, t + 101,
                            t + 200, t + 201, t + 206, t + 300, t + 301, nan};
  std::vector<double> wall{20, 15.5, 18, 20, 16.2, 19, 25, 24, 19.4, 20, 20, 20};
  const auto x = find_window_skew(start, wall, {0, 1, 2});
  ASSERT_TRUE(x);
  EXPECT_EQ(x->steps, 3u);
  EXPECT_NEAR(x->start_spread_ms, 5, 1e-3);
  EXPECT_NEAR(x->end_spread_ms, 0.4, 1e-3);
  EXPECT_EQ(x->last_rank, 1);
  EXPECT_EQ(x->times_last, 2u);
  EXPECT_EQ(x->first_rank, 0);
  EXPECT_NE(describe_window_skew(*x).find("rank 1 entered last in 2 of them, rank 0 first"), std::string::npos);
  // Ends as far apart as the starts (every wall 20 ms): ranks that start late finish late,
  // which own work sees.
  EXPECT_FALSE(find_window_skew(start, std::vector<double>(12, 20.0), {0, 1, 2}));
  // Starts 1.5 ms apart in 20 ms updates: below 10 % of the update.
  std::vector<double> close{t, t + 1.5, t, t + 100, t + 101.5, t + 100};
  EXPECT_FALSE(find_window_skew(close, {20, 18.5, 20, 20, 18.5, 20}, {0, 1, 2}));
  // ... and with 10 ms updates it is 15 %: a skew.
  EXPECT_TRUE(find_window_skew(close, {10, 8.5, 10, 10, 8.5, 10}, {0, 1, 2}));
  // No start known: none.
  EXPECT_FALSE(find_window_skew(std::vector<double>(6, nan), std::vector<double>(6, 10.0), {0, 1, 2}));
  // Ranks 4 and 8 enter last together (5 ms after rank 6), all leave at 15 ms: the lowest
  // of the two is named, and the text of one step says so.
  const auto tie = find_window_skew({t + 5, t, t + 5}, {10, 15, 10}, {4, 6, 8});
  ASSERT_TRUE(tie);
  EXPECT_EQ(tie->last_rank, 4);
  EXPECT_EQ(tie->first_rank, 6);
  EXPECT_NE(describe_window_skew(*tie).find("(one step; rank 4 entered last, rank 6 first)"), std::string::npos)
      << describe_window_skew(*tie);
}

// Two ranks behind in the same updates. 20 steps, 5 ranks whose own work is
// 100, 100, 100, 100, 110 ms, except steps 5..9, where rank 3 takes 160 and rank 4 180.
// Margins (slowest - median 100): 10 in 15 updates, 80 in 5: typical 10, MAD 0, so the
// threshold is 10 + 5 % of 100 = 15 ms. Rank 4 is the slowest everywhere and behind at
// steps 5..9 (margin 80, excess 5 x 70 = 350); rank 3 is behind there too although it is
// never the slowest (margin 60, excess 5 x 50 = 250). Each was behind alongside the other.
TEST(StragglerEpisodes, TwoRanksBehindAtOnceAreBothFound) {
  std::vector<std::vector<double>> compute(5);
  std::vector<UpdateSlowest> per_update;
  for (std::int64_t step = 1; step <= 20; ++step) {
    const bool slow = step >= 5 && step <= 9;
    const double row[5] = {100, 100, 100, slow ? 160.0 : 100.0, slow ? 180.0 : 110.0};
    for (std::size_t r = 0; r < 5; ++r) compute[r].push_back(row[r]);
    per_update.push_back({step, 4, row[4], 100, row[4] - 100});
  }
  std::vector<RankWork> ranks;
  for (std::size_t r = 0; r < 5; ++r) ranks.push_back({static_cast<std::int64_t>(r), &compute[r]});
  double threshold = 0;
  const auto both = find_straggler_episodes(per_update, threshold, ranks);
  EXPECT_DOUBLE_EQ(threshold, 15);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].rank, 3);
  EXPECT_EQ(both[1].rank, 4);
  for (const auto& e : both) {
    EXPECT_EQ(std::make_pair(e.first_step, e.last_step), std::make_pair(std::int64_t{5}, std::int64_t{9}));
    EXPECT_EQ(e.behind, 5u);
    EXPECT_EQ(e.shared, 5u);
  }
  EXPECT_DOUBLE_EQ(both[0].margin_ms, 60);
  EXPECT_DOUBLE_EQ(both[0].excess_ms, 250);
  EXPECT_EQ(both[0].alongside, std::vector<std::int64_t>{4});
  EXPECT_DOUBLE_EQ(both[1].margin_ms, 80);
  EXPECT_DOUBLE_EQ(both[1].excess_ms, 350);
  EXPECT_EQ(both[1].alongside, std::vector<std::int64_t>{3});

  // From the slowest rank of each update alone, rank 3 is hidden behind rank 4.
  const auto slowest_only = find_straggler_episodes(per_update, threshold);
  ASSERT_EQ(slowest_only.size(), 1u);
  EXPECT_EQ(slowest_only[0].rank, 4);
  EXPECT_EQ(slowest_only[0].shared, 0u);
}

// A rank behind in most updates. 20 steps, 5 ranks whose own work is 100, 101, 99, 100
// and 100 ms, except rank 4 takes 160 in steps 3..16 (14 of 20 updates). Every update's
// median rank takes 100. The slowest margins are 60 (14 times) and 1 (6 times): typical
// 60, MAD 0, threshold 65, so the first pass finds nothing: the straggler is the typical.
// Every rank's margins: -1 x20, 0 x46, 1 x20, 60 x14: typical 0, MAD 1, so the bound is
// 0 + max(3 x 1.4826, 5 % of 100) = 5 ms, and rank 4 is beyond it in all of steps 3..16:
// a long stretch of 14 updates (at least 10, density 1), margin 60. Removing it, each of
// those updates would wait for rank 1 (margin 1, above the typical 0): typical margin 1,
// excess 14 x (60 - 1) = 826.
TEST(StragglerEpisodes, ARankBehindInMostUpdatesIsALongStretch) {
  std::vector<std::vector<double>> compute(5);
  std::vector<UpdateSlowest> per_update;
  for (std::int64_t step = 1; step <= 20; ++step) {
    const double slow = step >= 3 && step <= 16 ? 160.0 : 100.0;
    const double row[5] = {100, 101, 99, 100, slow};
    for (std::size_t r = 0; r < 5; ++r) compute[r].push_back(row[r]);
    per_update.push_back({step, slow > 101 ? 4 : 1, std::max(slow, 101.0), 100, std::max(slow, 101.0) - 100});
  }
  std::vector<RankWork> ranks;
  for (std::size_t r = 0; r < 5; ++r) ranks.push_back({static_cast<std::int64_t>(r), &compute[r]});
  double threshold = 0;
  EXPECT_TRUE(find_straggler_episodes(per_update, threshold).empty());  // the slowest rank alone: missed
  EXPECT_DOUBLE_EQ(threshold, 65);
  const auto found = find_straggler_episodes(per_update, threshold, ranks);
  ASSERT_EQ(found.size(), 1u);
  const StragglerEpisode& e = found[0];
  EXPECT_EQ(e.rank, 4);
  EXPECT_TRUE(e.long_stretch);
  EXPECT_EQ(std::make_pair(e.first_step, e.last_step), std::make_pair(std::int64_t{3}, std::int64_t{16}));
  EXPECT_EQ(e.behind, 14u);
  EXPECT_EQ(e.updates, 14u);
  EXPECT_DOUBLE_EQ(e.margin_ms, 60);
  EXPECT_DOUBLE_EQ(e.typical_margin_ms, 1);
  EXPECT_DOUBLE_EQ(e.threshold_ms, 5);
  EXPECT_DOUBLE_EQ(e.excess_ms, 826);

  // Behind in 9 of the 20 updates only (steps 3..11): no longer most of them, so the
  // slowest margins' typical is 1 ms, the first pass's threshold 6 ms, and it finds them.
  for (std::size_t i = 11; i < 16; ++i) compute[4][i] = 100, per_update[i].margin_ms = 1, per_update[i].slowest_rank = 1;
  const auto fewer = find_straggler_episodes(per_update, threshold, ranks);
  EXPECT_DOUBLE_EQ(threshold, 6);
  ASSERT_EQ(fewer.size(), 1u);
  EXPECT_FALSE(fewer[0].long_stretch);
  EXPECT_EQ(std::make_pair(fewer[0].first_step, fewer[0].last_step), std::make_pair(std::int64_t{3}, std::int64_t{11}));
}

TEST(SlowUpdates, StepsBeyondTheMedianAndTheRegionThatGrew) {
  Builder b;
  // 20 updates of 100 ms (step k: 100 + k % 3 ms of jitter), with "step" = fwd 40 + bwd 50;
  // steps 7 and 8 take 150 ms, all of it in bwd (100 instead of 50).
  for (int step = 0; step < 20; ++step) {
    const bool slow = step == 7 || step == 8;
    const double jitter = step % 3;
    auto& u = b.add(step, (slow ? 150.0 : 100.0) + jitter);
    b.region(u, "step", slow ? 140.0 : 90.0, slow ? 140.0 : 90.0);
    b.region(u, "fwd", 40, 40);
    b.region(u, "bwd", slow ? 100.0 : 50.0, slow ? 100.0 : 50.0);
  }
  const Hierarchy h = parse("step\n  fwd\n  bwd\n");
  const auto s = analyze_slow_updates({b.d, &h});
  ASSERT_TRUE(s);
  // Walls: 100 + (0,1,2,...) jitter, median of the 20 = 101 (steps 7, 8: 151, 152).
  // |w - 101| has median 1, so 3 x 1.4826 = 4.45 < 10 % of 101: threshold 111.1.
  EXPECT_DOUBLE_EQ(s->typical_ms, 101);
  EXPECT_NEAR(s->threshold_ms, 111.1, 1e-9);
  EXPECT_EQ(s->steps, (std::vector<std::int64_t>{7, 8}));
  EXPECT_DOUBLE_EQ(s->slow_ms, (151.0 + 152.0) / 2);
  EXPECT_NEAR(s->excess_ms_per_update, ((151 - 101) + (152 - 101)) / 20.0, 1e-12);
  // "step" grew by 50 ms and its child bwd by all of it: the chain step -> bwd.
  ASSERT_GE(s->grew.size(), 2u);
  EXPECT_EQ(s->first_chain, 2u);
  EXPECT_EQ(s->grew[0].region, "step");
  EXPECT_EQ(s->grew[1].region, "bwd");
  EXPECT_DOUBLE_EQ(s->grew[1].slow_ms, 100);
  EXPECT_DOUBLE_EQ(s->grew[1].typical_ms, 50);
  for (const auto& g : s->grew) EXPECT_NE(g.region, "fwd");  // it did not grow
}

// A data-loader stall in 3 slow steps among 14 that ran a slow path: the medians over the
// slow steps name slow_path only (data's median there is its usual 2 ms). Worked by hand:
// 40 updates of 100 ms ("data" 2 + "step" 90 (fwd 40, bwd 50) + 8 outside); every 3rd step
// (0, 3, ..., 39: 14 steps) also runs slow_path 60 ms inside "step" (160 ms); steps 10, 20,
// 25 load for 50 ms (148 ms). Median update 100, MAD 0: threshold 110, all 17 slow. In
// each stall step data grew most (+48 of the step's 48 ms beyond 100); it is not in
// `grew` (step -> slow_path) nor related to it: another cause in 3 of 17 steps (>= 2 and
// a tenth).
TEST(SlowUpdates, StepsWithACauseOfTheirOwnAreNamed) {
  Builder b;
  for (int step = 0; step < 40; ++step) {
    const bool path = step % 3 == 0, stall = step == 10 || step == 20 || step == 25;
    auto& u = b.add(step, 100.0 + (path ? 60.0 : 0.0) + (stall ? 48.0 : 0.0));
    b.region(u, "data", stall ? 50.0 : 2.0, stall ? 50.0 : 2.0);
    b.region(u, "step", path ? 150.0 : 90.0, path ? 150.0 : 90.0);
    b.region(u, "fwd", 40, 40);
    b.region(u, "bwd", 50, 50);
    if (path) b.region(u, "slow_path", 60, 60);
  }
  const Hierarchy h = parse("data\nstep\n  fwd\n  slow_path\n  bwd\n");
  const auto s = analyze_slow_updates({b.d, &h});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->steps.size(), 17u);
  ASSERT_GE(s->grew.size(), 2u);
  EXPECT_EQ(s->grew[1].region, "slow_path");
  ASSERT_EQ(s->other_causes.size(), 1u);
  EXPECT_EQ(s->other_causes[0].region, "data");
  EXPECT_EQ(s->other_causes[0].steps, (std::vector<std::int64_t>{10, 20, 25}));
  EXPECT_DOUBLE_EQ(s->other_causes[0].grew_ms, 48);
  // One stall step only: not a cause of its own (it could be chance).
  Builder one;
  for (int step = 0; step < 40; ++step) {
    const bool path = step % 3 == 0, stall = step == 10;
    auto& u = one.add(step, 100.0 + (path ? 60.0 : 0.0) + (stall ? 48.0 : 0.0));
    one.region(u, "data", stall ? 50.0 : 2.0, stall ? 50.0 : 2.0);
    one.region(u, "step", path ? 150.0 : 90.0, path ? 150.0 : 90.0);
    if (path) one.region(u, "slow_path", 60, 60);
  }
  const auto s1 = analyze_slow_updates({one.d, &h});
  ASSERT_TRUE(s1);
  EXPECT_TRUE(s1->other_causes.empty());
}

TEST(SlowUpdates, NoneWithFewerThanTenSteps) {
  Builder b;
  for (int step = 0; step < 9; ++step) b.add(step, step == 4 ? 500.0 : 100.0);
  EXPECT_FALSE(analyze_slow_updates({b.d, nullptr}));
}

TEST(SlowUpdates, BackgroundRegionsAndTheirChildrenAreNotWhatGrew) {
  Builder b;
  // 20 updates of 100 ms ("work" 90); steps 3 and 4 take 200 ms ("work" 190). A loader
  // thread's "loader" (role background) with child "decode" runs longer in them too
  // (it runs for as long as the update lasts): not a cause.
  for (int step = 0; step < 20; ++step) {
    const bool slow = step == 3 || step == 4;
    auto& u = b.add(step, slow ? 200.0 : 100.0);
    b.region(u, "work", slow ? 190.0 : 90.0, slow ? 190.0 : 90.0);
    b.region(u, "loader", slow ? 195.0 : 95.0, slow ? 195.0 : 95.0);
    b.region(u, "decode", slow ? 150.0 : 50.0, slow ? 150.0 : 50.0);
    b.region(u, "tiny", slow ? 1.0 : 0.5, slow ? 1.0 : 0.5);  // grows by 0.5 ms: under a tenth of 100
  }
  const Hierarchy h = parse("work\ntiny\nloader role=background\n  decode\n");
  const auto s = analyze_slow_updates({b.d, &h});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->steps, (std::vector<std::int64_t>{3, 4}));
  ASSERT_EQ(s->grew.size(), 1u);
  EXPECT_EQ(s->grew[0].region, "work");
  EXPECT_DOUBLE_EQ(s->grew[0].slow_ms - s->grew[0].typical_ms, 100);
  const RegionTable t = analyze_regions({b.d, &h});
  EXPECT_TRUE(row(t, "loader").background);
  EXPECT_TRUE(row(t, "decode").background);  // nested in a background region: on its thread
  EXPECT_FALSE(row(t, "work").background);
  EXPECT_EQ(t.violation_count, 0u);  // loader is not a part of the update
}

// Ranks that slow down together (find_group_stretches, group_stretches.hpp). 8 ranks, 40
// updates at steps 1000..1039; own work 100 + rank ms, ranks 6, 7 150 ms (a stage heavier
// by design). In steps 1010..1014 ranks 4..7 (node_rank 1) take 1.5x. Worked by hand:
// ranks 4..7 are up there (>= 1.15x their medians), the other 4 not; stage 1 (ranks 6, 7)
// is up too but half of the others (4, 5) are as well, so it is not a set of its own. In
// those updates the slowest is rank 6 or 7 at 225 ms; with ranks 4..7 at 1/1.5 the slowest
// would be 150: 75 ms each, 75 x 5 / 40 = 9.375 ms per update.
struct GroupStretchCase {
  std::vector<std::vector<double>> compute = std::vector<std::vector<double>>(8);
  std::vector<UpdateSlowest> per_update;
  std::vector<ConfigDifference> classes{
      {"node_rank", {{"0", {0, 1, 2, 3}}, {"1", {4, 5, 6, 7}}}},
      {"hostname", {{"\"a\"", {0}}, {"\"b\"", {1}}, {"\"c\"", {2}}, {"\"d\"", {3}}, {"\"e\"", {4}},
                    {"\"f\"", {5}}, {"\"g\"", {6}}, {"\"h\"", {7}}}},
      {"stage", {{"0", {0, 1, 2, 3, 4, 5}}, {"1", {6, 7}}}}};
  explicit GroupStretchCase(std::size_t slow_from = 10, std::size_t slow_updates = 5, std::size_t slow_ranks_from = 4) {
    for (std::size_t r = 0; r < 8; ++r)
      for (std::size_t k = 0; k < 40; ++k) {
        double w = r >= 6 ? 150.0 : 100.0 + static_cast<double>(r);
        if (r >= slow_ranks_from && k >= slow_from && k < slow_from + slow_updates) w *= 1.5;
        compute[r].push_back(w);
      }
    for (std::size_t k = 0; k < 40; ++k) per_update.push_back({1000 + static_cast<std::int64_t>(k), 0, 0, 0, 0});
  }
  std::vector<GroupStretch> find() const {
    std::vector<RankWork> ranks;
    for (std::size_t r = 0; r < 8; ++r) ranks.push_back({static_cast<std::int64_t>(r), &compute[r]});
    return find_group_stretches(ranks, per_update, classes);
  }
};

TEST(GroupStretches, ANodeSlowForAFewUpdates) {
  const auto found = GroupStretchCase().find();
  ASSERT_EQ(found.size(), 1U);
  const GroupStretch& g = found.front();
  EXPECT_EQ(g.ranks, (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(g.key, "node_rank");
  EXPECT_EQ(g.value, "1");
  EXPECT_EQ(g.first_step, 1010);
  EXPECT_EQ(g.last_step, 1014);
  EXPECT_EQ(g.updates, 5U);
  EXPECT_DOUBLE_EQ(g.factor, 1.5);
  EXPECT_DOUBLE_EQ(g.others_factor, 1.0);
  EXPECT_DOUBLE_EQ(g.excess_ms, 75.0);
  EXPECT_DOUBLE_EQ(g.at_stake_ms, 9.375);
}

TEST(GroupStretches, NotTooShortNotEveryRankNotMostOfTheRun) {
  EXPECT_TRUE(GroupStretchCase(10, 2).find().empty());      // 2 updates: fewer than kGroupMinUpdates
  EXPECT_TRUE(GroupStretchCase(10, 5, 0).find().empty());   // every rank slowed: the whole job
  EXPECT_TRUE(GroupStretchCase(0, 20).find().empty());      // half the run: a slow group, not a stretch
  EXPECT_EQ(GroupStretchCase(0, 19).find().size(), 1U);
  GroupStretchCase none;
  none.classes.clear();  // no config that sets ranks apart: no candidates
  EXPECT_TRUE(none.find().empty());
  // A pair up together in 3 of every 8 updates (shared jitter): q = 15/40, and runs of 3
  // come 40 x 0.375^3 = 2.1 times by chance, x 3 candidate sets, far above 0.01: none of
  // its 5 runs is kept (each is 3 updates, under half the run: without the bound, 5).
  GroupStretchCase pair(0, 0);
  pair.classes = {{"pair", {{"0", {4, 5}}, {"1", {6, 7}}}}, {"node_rank", {{"0", {0, 1, 2, 3}}}}};
  for (std::size_t k = 0; k < 40; ++k)
    if (k % 8 < 3)
      for (std::size_t r : {4, 5}) pair.compute[r][k] *= 1.5;
  EXPECT_TRUE(pair.find().empty());
}

// Ranks slower together (find_slow_group, cross_rank.hpp). 6 ranks, 100 updates; own work
// 100, 102, 101, 120, 121, 119 ms in every update. Sorted means 100, 101, 102, 119, 120,
// 121: gaps 1, 1, 17, 1, 1, so ranks 3, 4, 5 are the slow group; gap 17 ms against the
// fast ranks' range 2 (and the slow ranks' 2 <= 2 x 17); fast 101, slow 120 (19 ms >= 5 %
// of 101). The lead (slow median 120 - fast median 101) is 19 in every update (no spread:
// no t statistic). Without it the slow ranks take 101, 102, 100: the update's slowest
// would be 102, against 121: 19 ms at stake.
TEST(SlowGroup, RanksSlowerTogether) {
  std::vector<std::vector<double>> compute(6);
  auto set = [&](std::initializer_list<double> work) {
    std::size_t r = 0;
    for (const double w : work) compute[r++].assign(100, w);
  };
  set({100, 102, 101, 120, 121, 119});
  std::vector<RankWork> ranks;
  for (std::size_t r = 0; r < 6; ++r) ranks.push_back({static_cast<std::int64_t>(r), &compute[r]});
  const auto g = find_slow_group(ranks);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->slow, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(g->fast, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(g->gap_ms, 17);
  EXPECT_DOUBLE_EQ(g->spread_ms, 2);
  EXPECT_DOUBLE_EQ(g->slow_spread_ms, 2);
  EXPECT_DOUBLE_EQ(g->fast_ms, 101);
  EXPECT_DOUBLE_EQ(g->slow_ms, 120);
  EXPECT_DOUBLE_EQ(g->at_stake_ms, 19);
  EXPECT_FALSE(g->lead_t);
  EXPECT_EQ(g->updates, 100u);
  EXPECT_EQ(g->updates_apart, 100u);
  EXPECT_EQ(g->updates_slowest, 100u);

  // Slow in updates 0..59 only (100 ms after): means 112, 112.6, 111.4 against 100, 102,
  // 101 (gap 9.4 > 2; 11 >= 5.05). Lead 19 in 60 updates and 100 - 101 = -1 in 40:
  // median 19, mean 11, standard deviation sqrt((60 x 8^2 + 40 x 12^2) / 99) = 9.847,
  // so the median's standard error 1.2533 x 9.847 / 10 = 1.234 and t = 15.4 >= 5. At
  // stake: 19 in 60 updates (as above), 0 in 40 (a fast rank is the slowest): 11.4.
  for (std::size_t r = 3; r < 6; ++r)
    for (std::size_t i = 60; i < 100; ++i) compute[r][i] = 100;
  const auto most = find_slow_group(ranks);
  ASSERT_TRUE(most);
  EXPECT_EQ(most->slow, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(most->updates_apart, 60u);
  EXPECT_EQ(most->updates_slowest, 60u);
  EXPECT_NEAR(most->at_stake_ms, 11.4, 1e-9);
  EXPECT_NEAR(most->slow_ms, 112, 1e-9);
  ASSERT_TRUE(most->lead_t);
  EXPECT_NEAR(*most->lead_t, 19 / (1.2533 * std::sqrt((60 * 64.0 + 40 * 144.0) / 99) / 10), 1e-9);

  // Slow in updates 0..39 only: the lead's median is -1: a stretch (an episode), not a
  // group.
  for (std::size_t r = 3; r < 6; ++r)
    for (std::size_t i = 40; i < 60; ++i) compute[r][i] = 100;
  EXPECT_FALSE(find_slow_group(ranks));

  // 4 % slower (104, 105, 103 against 101): under the 5 % floor.
  set({100, 102, 101, 104, 105, 103});
  EXPECT_FALSE(find_slow_group(ranks));

  // Tiers: 100, 101, 110, 119, 120, 121. Gaps 1, 9, 9, 1, 1; the tie is tried with the
  // fewer slow ranks first (3, 4, 5), but the fast side's range 110 - 100 = 10 is not
  // below the gap 9; then ranks 2..5 (fast range 1 < 9; slow range 11 less its largest
  // inner gap 9 is 2 <= 9): slow median 119.5, fast 100.5, lead 19. Without it, each
  // slow rank less the lead scaled by its own excess (9.5 / 19, 18.5 / 19, 19.5 / 19,
  // 20.5 / 19 of it) takes 100.5, 100.5, 99.5, 99.5; the fast ranks' slowest 101 stays:
  // at stake 121 - 101 = 20.
  set({100, 101, 110, 119, 120, 121});
  const auto tiers = find_slow_group(ranks);
  ASSERT_TRUE(tiers);
  EXPECT_EQ(tiers->slow, (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(tiers->gap_ms, 9);
  EXPECT_DOUBLE_EQ(tiers->slow_ms, 119.5);
  EXPECT_DOUBLE_EQ(tiers->at_stake_ms, 20);

  // Spread evenly (100, 104, ..., 120): every gap 4; only ranks 1..5 over rank 0 has a
  // fast range (0) below it, and their range 16 less its largest inner gap 4 is 12 > 4:
  // no group.
  set({100, 104, 108, 112, 116, 120});
  EXPECT_FALSE(find_slow_group(ranks));

  // Two ranks: the slower is a group of one (100 against 120: lead 20, at stake 20).
  ranks.resize(2);
  set({100, 120});
  const auto two = find_slow_group(ranks);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->slow, std::vector<std::int64_t>{1});
  EXPECT_DOUBLE_EQ(two->at_stake_ms, 20);
  EXPECT_FALSE(find_slow_group({ranks[0]}));

  // Two tiers: ranks 0, 1 at 100, ranks 2, 3 at 120, rank 4 at 200. Rank 4 alone (gap 80)
  // would save 200 - 120 = 80; ranks 2..4 (gap 20 > fast range 0; slow range 80 less its
  // inner gap 80 is 0) save more: lead 20 (medians 120 and 100), rank 4 less 20 x 100 / 20
  // = 100, ranks 2, 3 less 20 = 100: at stake 200 - 100 = 100. The larger is the group.
  std::vector<std::vector<double>> tiered = {std::vector<double>(10, 100), std::vector<double>(10, 100),
                                             std::vector<double>(10, 120), std::vector<double>(10, 120),
                                             std::vector<double>(10, 200)};
  std::vector<RankWork> tier_ranks;
  for (std::size_t r = 0; r < 5; ++r) tier_ranks.push_back({static_cast<std::int64_t>(r), &tiered[r]});
  const auto both = find_slow_group(tier_ranks);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->slow, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_DOUBLE_EQ(both->at_stake_ms, 100);

  // A rank 0.9 % slower is no tier (a real 4-rank gloo job): ranks 0, 1 at 1400 and 1402,
  // rank 3 at 1414, rank 2 at 1935. Ranks 2, 3 pass the tiers rule (gap 12 > fast range 2;
  // slow range 521 less its inner gap 521 is 0) and would save 533 against rank 2's 521,
  // but rank 3 is 13 ms (under 5 %) above the fast ranks' 1401: rank 2 alone.
  std::vector<std::vector<double>> job = {std::vector<double>(10, 1400), std::vector<double>(10, 1402),
                                          std::vector<double>(10, 1935), std::vector<double>(10, 1414)};
  std::vector<RankWork> job_ranks;
  for (std::size_t r = 0; r < 4; ++r) job_ranks.push_back({static_cast<std::int64_t>(r), &job[r]});
  const auto alone = find_slow_group(job_ranks);
  ASSERT_TRUE(alone);
  EXPECT_EQ(alone->slow, (std::vector<std::int64_t>{2}));
  EXPECT_DOUBLE_EQ(alone->at_stake_ms, 1935 - 1414);

  // A rank slow only in a stretch is no member: ranks 0-2 at 100, rank 3 at 115
  // throughout, rank 4 at 150 in updates 0..30 of 200 and 100 after (mean 107.75). By
  // means, rank 4 sat between: ranks 3, 4 passed every rule of the group (gap 7.75 > fast
  // range 0; lead 32.5 in 31 updates and 7.5 in 169: median 7.5 against 5 standard errors
  // 5 x 1.2533 x 9.07 / sqrt(200) = 4.02 and half the mean 11.375) and were a group of
  // two; rank 3 alone left rank 4's 107.75 on the fast side, a range of 7.75 against a
  // gap of 7.25. By medians (100, 100, 100, 115, 100) the only gap is rank 3's: 15 against
  // a fast range of 0. Fast 100 (median of the means 100, 100, 100, 107.75), lead 15 in
  // every update; at stake 0 in updates 0..30 (rank 4, a fast rank, is the slowest) and
  // 115 - 100 = 15 in the other 169: 15 x 169 / 200 = 12.675. Rank 4's stretch is an
  // episode.
  std::vector<std::vector<double>> stretch = {std::vector<double>(200, 100), std::vector<double>(200, 100),
                                              std::vector<double>(200, 100), std::vector<double>(200, 115),
                                              std::vector<double>(200, 100)};
  for (std::size_t i = 0; i < 31; ++i) stretch[4][i] = 150;
  std::vector<RankWork> stretch_ranks;
  for (std::size_t r = 0; r < 5; ++r) stretch_ranks.push_back({static_cast<std::int64_t>(r), &stretch[r]});
  const auto persistent = find_slow_group(stretch_ranks);
  ASSERT_TRUE(persistent);
  EXPECT_EQ(persistent->slow, std::vector<std::int64_t>{3});
  EXPECT_EQ(persistent->fast, (std::vector<std::int64_t>{0, 1, 2, 4}));
  EXPECT_DOUBLE_EQ(persistent->spread_ms, 0);
  EXPECT_DOUBLE_EQ(persistent->gap_ms, 15);
  EXPECT_DOUBLE_EQ(persistent->fast_ms, 100);
  EXPECT_FALSE(persistent->lead_t);
  EXPECT_EQ(persistent->updates_slowest, 169u);
  EXPECT_NEAR(persistent->at_stake_ms, 12.675, 1e-9);

  // A stretch that raises a rank's median above the gap: every rank's work moves with the
  // update (a = 100 in even updates, 120 in odd ones: medians 110); rank 3 takes a + 15
  // throughout (median 125), rank 4 a + 60 in updates 0..29 and a after (values 100 and
  // 120 85 times each, 160 and 180 15 times each: median 120). By medians 110, 110, 110,
  // 120, 125 the gap above rank 4 (5) is below the fast range with it (10); ranks 3, 4
  // pass the gap rules (10 > 0) and the lead's (7.5 in 170 updates, 37.5 in 30: median
  // 7.5 >= 5 x 1.2533 x 10.74 / sqrt(200) = 4.76 and >= half the mean 12), but rank 4's
  // own lead over the fast ranks (0 in 170 updates, 60 in 30) has median 0 < 5.5. It goes
  // to the fast side: rank 3 against ranks 0, 1, 2, 4, gap 125 - 110 = 15, fast 110
  // (median of the means 110, 110, 110, 119), lead 15 in every update (the fast ranks'
  // median is a, also in the stretch); at stake 15 in the 170 updates outside the
  // stretch, 0 in it (rank 4 is the slowest): 12.75.
  std::vector<std::vector<double>> moving(5, std::vector<double>(200));
  for (std::size_t i = 0; i < 200; ++i) {
    const double a = i % 2 == 0 ? 100 : 120;
    moving[0][i] = moving[1][i] = moving[2][i] = a;
    moving[3][i] = a + 15;
    moving[4][i] = i < 30 ? a + 60 : a;
  }
  std::vector<RankWork> moving_ranks;
  for (std::size_t r = 0; r < 5; ++r) moving_ranks.push_back({static_cast<std::int64_t>(r), &moving[r]});
  const auto raised = find_slow_group(moving_ranks);
  ASSERT_TRUE(raised);
  EXPECT_EQ(raised->slow, std::vector<std::int64_t>{3});
  EXPECT_EQ(raised->fast, (std::vector<std::int64_t>{0, 1, 2, 4}));
  EXPECT_DOUBLE_EQ(raised->gap_ms, 15);
  EXPECT_DOUBLE_EQ(raised->spread_ms, 0);
  EXPECT_DOUBLE_EQ(raised->fast_ms, 110);
  EXPECT_DOUBLE_EQ(raised->slow_ms, 125);
  EXPECT_FALSE(raised->lead_t);
  EXPECT_EQ(raised->updates_slowest, 170u);
  EXPECT_NEAR(raised->at_stake_ms, 12.75, 1e-9);
}

// A rank slow in a stretch, with fallbacks outside it, is judged outside its own stretch.
// 4 ranks, 200 updates: ranks 0-2 take 100 ms; rank 3 takes 130 in updates 0..79 (an
// episode of 80 < 100 updates), and 108 and 100 in turn after (its fallbacks). Over all
// updates its lead over the fast ranks' median is 30 x 80, 8 x 60, 0 x 60: median 8 >= 5 %
// of 100, so it was a group of one (median own work 108, gap 8 > spread 0; mean 114.4;
// lead mean 14.4, standard deviation 12.63, the median's standard error 1.2533 x 12.63 /
// sqrt(200) = 1.12, t = 7.1 >= 5; 8 >= half of 14.4). Outside its stretch the lead is
// 8 x 60 and 0 x 60: median 4 < 5, so it is no member, and there is no group.
TEST(SlowGroup, ARankIsJudgedOutsideItsOwnStretch) {
  std::vector<std::vector<double>> compute(4, std::vector<double>(200, 100));
  for (std::size_t i = 0; i < 200; ++i) compute[3][i] = i < 80 ? 130 : (i % 2 == 0 ? 108 : 100);
  std::vector<RankWork> ranks;
  for (std::size_t r = 0; r < 4; ++r) ranks.push_back({static_cast<std::int64_t>(r), &compute[r]});
  std::vector<UpdateSlowest> per_update;
  for (std::int64_t step = 1; step <= 200; ++step) per_update.push_back({step, 3, compute[3][step - 1], 100, 0});
  const auto without = find_slow_group(ranks);
  ASSERT_TRUE(without);
  EXPECT_EQ(without->slow, (std::vector<std::int64_t>{3}));
  EXPECT_DOUBLE_EQ(without->gap_ms, 8);
  StragglerEpisode e;
  e.rank = 3, e.first_step = 1, e.last_step = 80, e.updates = 80;
  EXPECT_FALSE(find_slow_group(ranks, per_update, {e}));
  // Episodes shorter than half the run that cover half of it together (steps 1..80 and
  // 101..130: 110 of 200) are the rank's lag found in pieces: it is judged on every update.
  StragglerEpisode e2;
  e2.rank = 3, e2.first_step = 101, e2.last_step = 130, e2.updates = 30;
  EXPECT_TRUE(find_slow_group(ranks, per_update, {e, e2}));
  // An episode over half the updates or more is the rank's lag itself: it still counts.
  e.last_step = 100, e.updates = 100;
  EXPECT_TRUE(find_slow_group(ranks, per_update, {e}));
}

// The straggler finding judges a rank on the updates outside its own stretches of falling
// behind (findings.cpp, straggler_finding_for), built by hand: 3 ranks, 200 aligned
// updates. Rank 1 is the slowest in steps 1..60 (a stretch, margin 2000 ms) and in 100 of
// the other 140 (margin 500 ms; ranks 0 and 2 take 20 each, margin 100 ms). Chance for 3
// ranks in 140 updates: 46.7 +- 3 x 5.58 = 63.4, below 100: a straggler outside the
// stretch. Its time at stake: the median margin outside (500 ms) in every update it was the
// slowest (160 of 200): 400 ms per update; the stretch's own finding prices the excess.
// A rank flagged by its relative score (below 0.75) that is never the slowest (rank 2 is,
// in every update): its finding said "a straggler: the slowest rank in 0 of 10 updates" and
// gave the other ranks' wait, which is for rank 2, as if it were for it. And a score below
// 0.75 from a lag of 0.02 % of the update (own work 0.07 against 0.05 ms of 100 ms
// updates, built the same way) was a finding with nothing at stake.
TEST(StragglerFinding, NeverTheSlowestSaysSoAndANegligibleLagIsNone) {
  auto build = [](double fast_ms, double scored_ms) {
    CrossRankResult x;
    x.available = true;
    x.comm_region = "allreduce";
    x.steps_aligned = 10;
    for (std::int64_t step = 0; step < 10; ++step) {
      UpdateSlowest u;
      u.step = step;
      u.slowest_rank = 2;
      u.median_compute_ms = scored_ms;
      u.margin_ms = 50;
      x.per_update.push_back(u);
    }
    x.margin_ms = summarize(std::vector<double>(10, 50.0));
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      RankStraggler r;
      r.rank = rank;
      r.compute_ms.median = rank == 0 ? fast_ms : rank == 1 ? scored_ms : scored_ms + 50;
      r.comm_ms = Summary{};
      r.comm_ms->median = 100 - r.compute_ms.median;
      r.wait_ms.median = rank == 2 ? 0 : 40;
      r.relative_score = fast_ms / r.compute_ms.median;
      r.straggler = r.relative_score < 0.75;
      r.times_slowest = rank == 2 ? 10 : 0;
      x.per_rank.push_back(r);
    }
    return x;
  };
  const UpdateTimeResult time;
  const RegionTable regions;
  const CodePathResult paths;
  const PaddingResult padding;
  const std::vector<WaitingResult> waiting;
  const std::optional<SlowUpdates> slow;
  auto about_rank1 = [&](const CrossRankResult& x) {
    std::vector<Finding> out;
    for (auto& f : derive_findings({time, regions, paths, padding, waiting, x, nullptr, slow}))
      if (f.subject == "rank 1") out.push_back(f);
    return out;
  };
  // Own work 6 against 4 ms: score 0.67, a lag of 2 ms, 2 % of the 100 ms update.
  const auto found = about_rank1(build(4, 6));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, "straggler");
  EXPECT_EQ(found[0].title,
            "rank 1 is a straggler by its relative score (0.67) but never the slowest rank: a slower one always is");
  EXPECT_EQ(found[0].ms_per_update, 0);
  EXPECT_NE(found[0].evidence.find("takes 6 ms per update (median) against 4 ms on the fastest rank"),
            std::string::npos)
      << found[0].evidence;
  EXPECT_NE(found[0].evidence.find("what the other ranks wait is for the slower ones"), std::string::npos);
  EXPECT_EQ(found[0].evidence.find("on average"), std::string::npos) << found[0].evidence;
  // Own work 0.07 against 0.05 ms: score 0.71, a lag of 0.02 ms, 0.02 % of the update.
  EXPECT_TRUE(about_rank1(build(0.05, 0.07)).empty());
}

TEST(StragglerFinding, JudgedOutsideItsOwnStretches) {
  CrossRankResult x;
  x.available = true;
  x.comm_region = "backward_and_communication";
  x.steps_aligned = 200;
  for (std::int64_t step = 1; step <= 200; ++step) {
    UpdateSlowest u;
    u.step = step;
    u.median_compute_ms = 10'000;
    const bool stretch = step <= 60, theirs = !stretch && (step % 7 == 0 || step % 7 == 3);  // 40 of 140
    u.slowest_rank = theirs ? (step % 2) * 2 : 1;
    u.margin_ms = stretch ? 2000 : theirs ? 100 : 500;
    x.per_update.push_back(u);
  }
  std::vector<double> margins;
  for (const auto& u : x.per_update) margins.push_back(u.margin_ms);
  x.margin_ms = summarize(margins);
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    RankStraggler r;
    r.rank = rank;
    r.compute_ms.median = rank == 1 ? 9'000 : 8'500;  // (a margin must be 5 % of it: 450 ms)
    r.relative_score = rank == 1 ? 0.95 : 1.0;
    for (const auto& u : x.per_update) r.times_slowest += u.slowest_rank == rank ? 1 : 0;
    x.per_rank.push_back(r);
  }
  ASSERT_EQ(x.per_rank[1].times_slowest, 160u);
  StragglerEpisode e;
  e.rank = 1, e.first_step = 1, e.last_step = 60, e.updates = 60, e.behind = 60;
  e.margin_ms = 2000, e.typical_margin_ms = 500, e.excess_ms = 60 * 1500.0;
  x.episodes.push_back(e);

  const UpdateTimeResult time;
  const RegionTable regions;
  const CodePathResult paths;
  const PaddingResult padding;
  const std::vector<WaitingResult> waiting;
  const std::optional<SlowUpdates> slow;
  const auto findings = derive_findings({time, regions, paths, padding, waiting, x, nullptr, slow});
  const Finding* straggler = nullptr;
  const Finding* stretch = nullptr;
  for (const auto& f : findings) {
    if (f.kind == "straggler") straggler = &f;
    if (f.kind == "straggler_episode") stretch = &f;
  }
  ASSERT_NE(straggler, nullptr);
  EXPECT_EQ(straggler->subject, "rank 1");
  EXPECT_NE(straggler->title.find("in 100 of 140 updates outside its stretches"), std::string::npos) << straggler->title;
  EXPECT_NE(straggler->evidence.find("the 60 updates of its stretches of falling behind are left out"), std::string::npos);
  EXPECT_DOUBLE_EQ(straggler->ms_per_update, 500.0 * 160 / 200);
  ASSERT_NE(stretch, nullptr);
  EXPECT_DOUBLE_EQ(stretch->ms_per_update, 60 * 1500.0 / 200);

  // Rank 1 the slowest in only 50 of the 140 (chance): the stretch alone is a finding.
  int moved = 0;
  for (auto& u : x.per_update)
    if (u.step > 60 && u.slowest_rank == 1 && moved < 50) {
      u.slowest_rank = 0, u.margin_ms = 100;
      ++moved;
    }
  x.per_rank[1].times_slowest = 110;
  const auto fewer = derive_findings({time, regions, paths, padding, waiting, x, nullptr, slow});
  for (const auto& f : fewer) EXPECT_NE(f.kind, "straggler") << f.title;
}

// The analyses' index: a region in at least 1/32 of the updates gets columns, a rarer
// one a list of its samples (a name per step made a column per name over every update).
// 64 updates: "fwd" in all, "rare" in updates 5 and 40 (2 of 64 >= 1/32: columns),
// "once" in update 9 only (1 of 64 < 1/32: listed), listed twice there (the first entry
// wins, as in UpdateRecord::region).
TEST(UpdateIndex, RareRegionsAreListedNotGivenColumns) {
  Dataset d;
  const auto fwd = d.regions.intern("fwd"), rare = d.regions.intern("rare"), once = d.regions.intern("once");
  RankLog log;
  log.rank = 0;
  for (int s = 0; s < 64; ++s) {
    UpdateRecord u;
    u.step = s;
    u.wall_ms = 100;
    RegionSample f;
    f.region = fwd, f.host_ms = 10.0 + s, f.calls = std::int64_t{1};
    u.regions.push_back(f);
    if (s == 5 || s == 40) {
      RegionSample r;
      r.region = rare, r.device_ms = 3.0 + s;
      u.regions.push_back(r);
    }
    if (s == 9) {
      RegionSample o;
      o.region = once, o.host_ms = 7.0, o.calls = std::int64_t{2};
      u.regions.push_back(o);
      o.host_ms = 8.0;
      u.regions.push_back(o);
    }
    log.updates.push_back(std::move(u));
  }
  d.ranks.push_back(std::move(log));
  const AnalysisInput plain{d};
  const auto updates = plain.updates();
  const UpdateIndex index(updates, d.regions.size());
  EXPECT_EQ(index.columns(fwd).present.size(), 64u);
  EXPECT_EQ(index.columns(rare).present.size(), 64u);
  EXPECT_TRUE(index.listing(fwd).empty());
  EXPECT_TRUE(index.columns(once).present.empty());
  const auto listed = index.listing(once);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].k, 9u);
  EXPECT_EQ(listed[0].sample, &updates[9]->regions[1]);
  for (std::size_t k = 0; k < 64; ++k) {
    const auto v = index.find(k, *updates[k], once);
    ASSERT_EQ(v.has_value(), k == 9) << k;
    EXPECT_EQ(index.time(k, *updates[k], once, false), k == 9 ? std::optional<double>(7.0) : std::nullopt);
    EXPECT_EQ(index.find(k, *updates[k], fwd)->host_ms, 10.0 + static_cast<double>(k));
  }
  EXPECT_EQ(index.find(9, *updates[9], once)->calls, 2);
  const AnalysisInput in{d, nullptr, &index};
  const RegionColumns c(in, updates, once);
  for (std::size_t k = 0; k < 64; ++k) {
    EXPECT_EQ(c.get().present[k], k == 9 ? 1 : 0) << k;
    EXPECT_EQ(std::isnan(c.get().host[k]), k != 9) << k;
  }
  EXPECT_EQ(c.get().host[9], 7.0);
  EXPECT_EQ(c.get().calls[9], 2.0);
}

TEST(UpdateIndex, LargeInputsJudgeColumnsOnASampleButAnswerLikeTheRecords) {
  // From 65,536 updates, which names get columns is judged on every 16th update; every
  // lookup must still give what the records hold (UpdateRecord::region), and which
  // regions have data or device times must come from every update.
  Dataset d;
  const auto fwd = d.regions.intern("fwd"), half = d.regions.intern("half"), rare = d.regions.intern("rare");
  RankLog log;
  log.rank = 0;
  constexpr int kUpdates = 70'000;
  for (int s = 0; s < kUpdates; ++s) {
    UpdateRecord u;
    u.step = s;
    u.wall_ms = 100;
    RegionSample f;
    f.region = fwd, f.host_ms = 10.0 + s, f.calls = std::int64_t{1};
    u.regions.push_back(f);
    if (s % 2 == 0) {
      RegionSample h;
      h.region = half, h.host_ms = 1.0 + s;
      u.regions.push_back(h);
    }
    if (s % 1000 == 7) {  // k mod 16 is 7 or 15: in no sampled update
      RegionSample r;
      r.region = rare, r.device_ms = 3.0 + s;
      u.regions.push_back(r);
    }
    log.updates.push_back(std::move(u));
  }
  d.ranks.push_back(std::move(log));
  const AnalysisInput plain{d};
  const auto updates = plain.updates();
  const UpdateIndex index(updates, d.regions.size());
  EXPECT_EQ(index.columns(fwd).present.size(), static_cast<std::size_t>(kUpdates));
  EXPECT_EQ(index.columns(half).present.size(), static_cast<std::size_t>(kUpdates));
  EXPECT_TRUE(index.columns(rare).present.empty());
  const auto listed = index.listing(rare);
  ASSERT_EQ(listed.size(), 70u);
  for (std::size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(listed[i].k, 1000 * i + 7);
    EXPECT_EQ(listed[i].sample->device_ms, 3.0 + static_cast<double>(1000 * i + 7));
  }
  EXPECT_TRUE(index.has_device_time(rare));
  EXPECT_FALSE(index.has_device_time(half));
  EXPECT_TRUE(index.has_data(half));
  for (std::size_t k = 0; k < updates.size(); ++k)
    for (const auto id : {fwd, half, rare}) {
      const RegionSample* s = updates[k]->region(id);
      const auto v = index.find(k, *updates[k], id);
      ASSERT_EQ(v.has_value(), s != nullptr) << k << " " << id;
      if (!s) continue;
      const std::optional<double> device = s->device_ms ? std::optional<double>(*s->device_ms) : std::nullopt;
      const std::optional<double> host = s->host_ms ? std::optional<double>(*s->host_ms) : std::nullopt;
      ASSERT_EQ(v->device_ms, device) << k;
      ASSERT_EQ(v->host_ms, host) << k;
    }
}

// gpu_busy.hpp on three ranks worked out by hand. Rank 0: walls 100, 100, busy 90, 80
// (idle 10 %, 20 %: median 15 %); rank 1: walls 100, 50, 200, busy 20, 30, 40 (idle 80 %,
// 40 %, 80 %: median 80 %, the most idle, in the middle of the ranks); rank 2: wall 100
// without gpu_busy_ms, wall 0 with it (both left out), wall 10 with busy 12 (idle 0, not
// negative).
TEST(GpuBusy, PoolsTheRanksUpdatesAndNamesTheMostIdleRank) {
  Dataset d;
  auto add = [&](std::int64_t rank, std::int64_t step, double wall, std::optional<double> busy) {
    if (d.ranks.empty() || d.ranks.back().rank != rank) {
      d.ranks.emplace_back();
      d.ranks.back().rank = rank;
    }
    UpdateRecord u;
    u.rank = rank;
    u.step = step;
    u.wall_ms = wall;
    if (busy) u.extra.push_back({"gpu_busy_ms", std::to_string(*busy)});
    d.ranks.back().updates.push_back(u);
  };
  add(0, 1, 100, 90), add(0, 2, 100, 80);
  add(1, 1, 100, 20), add(1, 2, 50, 30), add(1, 3, 200, 40);
  add(2, 1, 100, std::nullopt), add(2, 2, 0, 0), add(2, 3, 10, 12);
  const auto g = analyze_gpu_busy({d, nullptr});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->updates, 6u);
  EXPECT_EQ(g->updates_total, 8u);
  EXPECT_EQ(g->ranks, 3u);
  ASSERT_TRUE(g->most_idle_rank);
  EXPECT_EQ(*g->most_idle_rank, 1);
  EXPECT_DOUBLE_EQ(g->most_idle_fraction, 0.8);
  // Idle ms: 10, 20, 80, 20, 160, 0 -> median of (0, 10, 20, 20, 80, 160) = 20.
  EXPECT_DOUBLE_EQ(g->idle_ms.median, 20);
  EXPECT_DOUBLE_EQ(g->idle_ms.min, 0);
  // Idle fractions 0.1, 0.2, 0.8, 0.4, 0.8, 0 -> median of (0, .1, .2, .4, .8, .8) = 0.3.
  EXPECT_DOUBLE_EQ(g->idle_fraction.median, 0.3);
  EXPECT_DOUBLE_EQ(g->busy_ms.max, 90);
  EXPECT_DOUBLE_EQ(g->busy_ms.min, 10);  // (12 ms busy in a 10 ms update: busy throughout)
  EXPECT_EQ(describe_gpu_busy_updates(*g),
            "6 of the 8 update records, of 3 ranks (the others have no gpu_busy_ms or a wall_ms of 0)");
  // Only rank 1 of two has the field: it is the most idle one, and the text says of how many.
  Dataset two;
  two.ranks = {d.ranks[1], d.ranks[2]};
  for (auto& u : two.ranks[1].updates) u.extra.clear();
  const auto g2 = analyze_gpu_busy({two, nullptr});
  ASSERT_TRUE(g2 && g2->most_idle_rank);
  EXPECT_EQ(*g2->most_idle_rank, 1);
  EXPECT_EQ(g2->ranks_total, 2u);
  EXPECT_EQ(describe_gpu_busy_updates(*g2),
            "3 of the 6 update records, of 1 of the 2 ranks (the others have no gpu_busy_ms or a wall_ms of 0)");
  // One rank: no most idle one. No update with the field: no result.
  Dataset one;
  one.ranks.push_back(d.ranks[0]);
  EXPECT_FALSE(analyze_gpu_busy({one, nullptr})->most_idle_rank);
  EXPECT_EQ(describe_gpu_busy_updates(*analyze_gpu_busy({one, nullptr})), "2 updates");
  one.ranks[0].updates[0].extra.clear(), one.ranks[0].updates[1].extra.clear();
  EXPECT_FALSE(analyze_gpu_busy({one, nullptr}));
}
