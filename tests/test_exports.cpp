// Per-update series, the trace layout, the CSV tables and the HTML escaping, on small
// hand-built datasets whose answers are worked out in the comments.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "html_escape.hpp"
#include "json_common.hpp"
#include "many_ranks.hpp"
#include "stepprof/analysis/series.hpp"
#include "stepprof/analysis/timeline.hpp"
#include "stepprof/render/exports.hpp"
#include "test_util.hpp"

using namespace stepprof;

namespace {

using Builder = test::DatasetBuilder;

Hierarchy parse(const std::string& text) {
  Diagnostics diag;
  auto h = parse_hierarchy(text, "test", diag);
  EXPECT_TRUE(h);
  return *h;
}

const StackPart& part(const Breakdown& b, StackPart::Kind kind, std::string_view region) {
  for (const auto& p : b.parts)
    if (p.kind == kind && p.region == region) return p;
  ADD_FAILURE() << "no part " << region;
  return b.parts.front();
}

// Update 1: wall 100; outer 90 (host 91) = a 30 + b 50 + self 10; top 5.
// Update 2: wall 120; outer 110 (host 111) = a 40 + b absent + self 70; top 5.
Builder nested() {
  Builder b;
  auto& u1 = b.add(1, 100);
  b.region(u1, "top", 5.0, 5.0);
  b.region(u1, "outer", 90.0, 91.0, 2);
  b.region(u1, "a", 30.0, 30.0);
  b.region(u1, "b", 50.0, 50.0);
  b.counter(u1, "token_slots", 1000);
  b.counter(u1, "valid_tokens", 750);
  auto& u2 = b.add(2, 120);
  b.region(u2, "top", 5.0, 5.0);
  b.region(u2, "outer", 110.0, 111.0, 2);
  b.region(u2, "a", 40.0, 40.0);
  u2.padding_fraction = 0.5;  // no counters in this update: the logged field is used
  return b;
}

}  // namespace

TEST(Series, RegionPointsSelfTimesAndCuts) {
  Builder b = nested();
  const Hierarchy h = parse("top\nouter\n  a\n  b\n");
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const UpdateSeries s = build_series(in, rep);
  ASSERT_EQ(s.ranks.size(), 1u);
  const RankSeries& r = s.ranks[0];
  EXPECT_EQ(r.steps, (std::vector<std::int64_t>{1, 2}));
  // 1 - 750 / 1000 from the counters; then the logged 0.5.
  EXPECT_DOUBLE_EQ(*r.padding_fraction[0], 0.25);
  EXPECT_DOUBLE_EQ(*r.padding_fraction[1], 0.5);
  // Outside: wall - host(top + outer) = 100 - 96 = 4 and 120 - 116 = 4.
  EXPECT_DOUBLE_EQ(*r.outside_ms[0], 4);
  EXPECT_DOUBLE_EQ(*r.outside_ms[1], 4);
  // Region points: 4 in update 1, 3 in update 2 (b absent).
  EXPECT_EQ(r.regions.size(), 7u);
  for (const auto& p : r.regions) {
    const auto& name = s.regions[p.region].name;
    if (name == "outer" && p.update == 0) {
      EXPECT_DOUBLE_EQ(*p.device_self_ms, 10);  // 90 - 30 - 50
      EXPECT_DOUBLE_EQ(*p.host_self_ms, 11);    // 91 - 30 - 50
      EXPECT_EQ(*p.calls, 2);
    }
    if (name == "outer" && p.update == 1) {
      EXPECT_DOUBLE_EQ(*p.device_self_ms, 70);  // 110 - 40
    }
    if (name == "a" && p.update == 0) {
      EXPECT_DOUBLE_EQ(*p.device_self_ms, 30);  // a leaf: itself
    }
  }
  // Level 0: top, outer, outside. Level 1: top, outer (self), a, b, outside.
  ASSERT_EQ(r.breakdowns.size(), 2u);
  EXPECT_EQ(r.breakdowns[0].parts.size(), 3u);
  EXPECT_DOUBLE_EQ(*part(r.breakdowns[0], StackPart::Kind::kRegion, "outer").ms[0], 90);
  const Breakdown& leaves = r.breakdowns[1];
  EXPECT_EQ(leaves.parts.size(), 5u);
  EXPECT_DOUBLE_EQ(*part(leaves, StackPart::Kind::kSelf, "outer").ms[1], 70);
  EXPECT_FALSE(part(leaves, StackPart::Kind::kRegion, "b").ms[1].has_value());  // absent, not 0
  // Update 1 at the deepest cut: 5 + 10 + 30 + 50 + 4 = 99 (device 90 vs host 91 for outer).
  double sum = 0;
  for (const auto& p : leaves.parts) sum += p.ms[0].value_or(0);
  EXPECT_DOUBLE_EQ(sum, 99);
  EXPECT_TRUE(s.matrices.empty());  // one rank
}

// A child with device time in some updates and host time only in others (the review of
// the host-only rule): where it has no device time, the stack at the deepest cut takes
// its host time and the parent's host self time, so that the update's parts still add
// up; before, the child's part was missing there (the stack lost 20 ms of 119).
TEST(Series, APartWithoutDeviceTimeInAnUpdateStacksItsHostTime) {
  Builder b;
  for (int step = 1; step <= 2; ++step)
    b.family(b.add(step, 120), {"f", 100.0, 101.0},
             {{"a", 30.0, 31.0}, {"v", step == 2 ? std::optional<double>(20.0) : std::nullopt, 20.0}});
  const Hierarchy h = parse("f\n  a\n  v\n");
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const UpdateSeries s = build_series(in, rep);
  const Breakdown& leaves = s.ranks[0].breakdowns.back();
  // Step 1: f's host self 101 - 31 - 20 = 50, a 30 (device), v 20 (host), outside 120 - 101 = 19.
  EXPECT_DOUBLE_EQ(*part(leaves, StackPart::Kind::kSelf, "f").ms[0], 50);
  EXPECT_DOUBLE_EQ(*part(leaves, StackPart::Kind::kRegion, "v").ms[0], 20);
  // Step 2, all on the device: f's self 100 - 30 - 20 = 50.
  EXPECT_DOUBLE_EQ(*part(leaves, StackPart::Kind::kSelf, "f").ms[1], 50);
  for (std::size_t k = 0; k < 2; ++k) {
    double sum = 0;
    for (const auto& p : leaves.parts) sum += p.ms[k].value_or(0);
    EXPECT_DOUBLE_EQ(sum, 50 + 30 + 20 + 19) << k;
  }
}

TEST(Series, RanksNotInFullKeepWhatHeatmapsNeedOnly) {
  // Two ranks with the same updates; rank 1 built in part: its steps, wall_ms, padding
  // and outside time as rank 0's (given by hand in nested()), nothing per region.
  Builder b(2);
  for (int rank = 0; rank < 2; ++rank) {
    auto& u = b.add(1, 100, rank);
    b.region(u, "top", 5.0, 5.0, 1);
    b.region(u, "outer", 90.0, 91.0, 2);
    b.counter(u, "token_slots", 1000);
    b.counter(u, "valid_tokens", 750);
  }
  const Hierarchy h = parse("top\nouter\n");
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const std::vector<bool> full{true, false};
  const UpdateSeries s = build_series(in, rep, &full);
  ASSERT_EQ(s.ranks.size(), 2u);
  for (const auto& r : s.ranks) {
    EXPECT_EQ(r.steps, (std::vector<std::int64_t>{1}));
    EXPECT_EQ(r.wall_ms, (std::vector<double>{100}));
    EXPECT_DOUBLE_EQ(*r.padding_fraction[0], 0.25);
    EXPECT_DOUBLE_EQ(*r.outside_ms[0], 4);  // 100 - (5 + 91)
  }
  EXPECT_FALSE(s.ranks[0].regions.empty());
  EXPECT_FALSE(s.ranks[0].breakdowns.empty());
  EXPECT_EQ(s.ranks[0].counters.size(), 2u);
  EXPECT_TRUE(s.ranks[1].regions.empty());
  EXPECT_TRUE(s.ranks[1].breakdowns.empty());
  EXPECT_TRUE(s.ranks[1].counters.empty());
  EXPECT_TRUE(s.ranks[1].paths.empty());
  ASSERT_EQ(s.matrices.size(), 1u);  // (no communication region)
  EXPECT_EQ(s.matrices[0].values[1], (std::vector<std::optional<double>>{100.0}));
}

TEST(Series, ARankBuiltForTheTablesHasItsCountersAndRegionsOnly) {
  // The CSV tables build one rank at a time (SeriesBuilder, RankDetail::kTables): the
  // values of the hand-made update (nested(): top 5 ms, outer 91 ms host), no charts.
  Builder b(1);
  auto& u = b.add(1, 100, 0);
  b.region(u, "top", 5.0, 5.0, 1);
  b.region(u, "outer", 90.0, 91.0, 2);
  b.counter(u, "token_slots", 1000);
  b.counter(u, "valid_tokens", 750);
  const Hierarchy h = parse("top\nouter\n");
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const SeriesBuilder builder(in, rep);
  ASSERT_EQ(builder.rank_count(), 1u);
  EXPECT_EQ(builder.head().counters, (std::vector<std::string>{"token_slots", "valid_tokens"}));
  EXPECT_TRUE(builder.head().ranks.empty());
  const RankSeries t = builder.rank(0, RankDetail::kTables);
  EXPECT_EQ(t.wall_ms, (std::vector<double>{100}));
  ASSERT_EQ(t.counters.size(), 2u);
  EXPECT_EQ(t.counters[0], (std::vector<std::optional<double>>{1000.0}));
  EXPECT_EQ(t.counters[1], (std::vector<std::optional<double>>{750.0}));
  ASSERT_EQ(t.regions.size(), 2u);
  std::vector<double> host;
  for (const auto& p : t.regions) host.push_back(*p.host_ms);
  std::sort(host.begin(), host.end());
  EXPECT_EQ(host, (std::vector<double>{5.0, 91.0}));
  EXPECT_TRUE(t.breakdowns.empty());
  EXPECT_TRUE(t.paths.empty());
  const RankSeries headline = builder.rank(0, RankDetail::kHeadline);
  EXPECT_TRUE(headline.regions.empty());
  EXPECT_TRUE(headline.counters.empty());
  EXPECT_DOUBLE_EQ(*headline.outside_ms[0], 4);  // 100 - (5 + 91)
  EXPECT_FALSE(builder.rank(0, RankDetail::kFull).breakdowns.empty());
}

TEST(Series, TheOverviewHoldsEveryRanksHeadlineAndTheHeatmaps) {
  // Two ranks, as above; the overview is build_series with no rank in full.
  Builder b(2);
  for (int rank = 0; rank < 2; ++rank) {
    auto& u = b.add(1, 100.0 + rank, rank);
    b.region(u, "top", 5.0, 5.0, 1);
    b.region(u, "outer", 90.0, 91.0, 2);
    b.region(u, "inner", 40.0, 40.0, 2);
  }
  const Hierarchy h = parse("top\nouter\n  inner\n");
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const SeriesBuilder builder(in, rep);
  const UpdateSeries o = builder.overview();
  ASSERT_EQ(o.ranks.size(), 2u);
  EXPECT_EQ(o.steps, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(o.ranks[1].wall_ms, (std::vector<double>{101}));
  EXPECT_DOUBLE_EQ(*o.ranks[1].outside_ms[0], 5);  // 101 - (5 + 91)
  for (const auto& r : o.ranks) EXPECT_TRUE(r.breakdowns.empty() && r.regions.empty());
  ASSERT_EQ(o.matrices.size(), 1u);
  EXPECT_EQ(o.matrices[0].values, (std::vector<std::vector<std::optional<double>>>{{100.0}, {101.0}}));
  // The nesting has two levels (top and outer; inner under outer): every rank's full series
  // has a cut per level, as breakdown_count says from the regions alone.
  EXPECT_EQ(breakdown_count(o), 2u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(builder.rank(i, RankDetail::kFull).breakdowns.size(), 2u);
  const AnalysisInput flat{b.d, nullptr};
  const Report flat_rep = build_report(flat);
  EXPECT_EQ(breakdown_count(SeriesBuilder(flat, flat_rep).head()), 1u);  // unknown nesting: one unstacked
}

TEST(Html, ThePageIsHandedOnInPiecesAndStopsAtAFailedWrite) {
  // 3 ranks x 3,000 updates with 20 regions each (times of 17 digits): a page of several
  // MB, handed on in pieces of at least 1 MiB (the last one smaller).
  Builder b(3);
  std::string nesting;
  for (int i = 0; i < 20; ++i) nesting += "region_" + std::to_string(i) + "\n";
  for (int rank = 0; rank < 3; ++rank)
    for (int step = 1; step <= 3000; ++step) {
      auto& u = b.add(step, 1000.0 + step % 17 + rank, rank);
      for (int i = 0; i < 20; ++i) b.region(u, "region_" + std::to_string(i), 1.0 + (step * (i + 3)) % 11 / 7.0, 2.0, 1);
    }
  const Hierarchy h = parse(nesting);
  const AnalysisInput in{b.d, &h};
  const Report rep = build_report(in);
  const SeriesBuilder series(in, rep);
  const Diagnostics diag;
  std::vector<std::size_t> sizes;
  std::string page;
  ASSERT_TRUE(render_html(rep, series, diag, {}, [&](std::string_view piece) {
    sizes.push_back(piece.size());
    page.append(piece);
    return true;
  }));
  ASSERT_GE(sizes.size(), 2u) << page.size();
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_GE(sizes[i], std::size_t{1} << 20);
  EXPECT_GT(sizes.back(), 0u);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(page.substr(page.size() - 8), "</html>\n");
  // The chart data is one JSON object, as the page's script reads it.
  const std::string open = "<script type=\"application/json\" id=\"stepprof-data\">";
  const auto at = page.find(open) + open.size();
  const auto data = nlohmann::json::parse(page.substr(at, page.find("</script>", at) - at));
  ASSERT_EQ(data["ranks"].size(), 3u);
  EXPECT_EQ(data["ranks"][2]["label"], "rank 2");
  // At most 2,000 points a line: 3,000 updates are drawn as means of 2, 1,500 points.
  EXPECT_EQ(data["ranks"][2]["wall_ms"].size(), 1500u);
  EXPECT_DOUBLE_EQ(data["ranks"][2]["wall_ms"][0].get<double>(), (1000.0 + 1 + 2 + 1000.0 + 2 + 2) / 2);
  int calls = 0;
  EXPECT_FALSE(render_html(rep, series, diag, {}, [&](std::string_view) {
    ++calls;
    return false;
  }));
  EXPECT_EQ(calls, 1);  // (nothing more after the failed write)
}

TEST(Html, ChartsEveryRankOfSmallJobs) {
  Builder b(3);
  for (int rank = 0; rank < 3; ++rank) b.add(1, 100 + rank, rank);
  const AnalysisInput in{b.d, nullptr};
  EXPECT_EQ(html_chart_ranks(build_report(in), b.d), (std::vector<bool>{true, true, true}));
}

TEST(Series, WithoutNestingOneUnstackedBreakdown) {
  Builder b = nested();
  const AnalysisInput in{b.d, nullptr};
  const UpdateSeries s = build_series(in, build_report(in));
  const auto& cuts = s.ranks[0].breakdowns;
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_FALSE(cuts[0].stacked);
  EXPECT_EQ(cuts[0].level, -1);
  EXPECT_EQ(cuts[0].parts.size(), 4u);
  EXPECT_FALSE(s.ranks[0].outside_ms[0].has_value());
  for (const auto& p : s.ranks[0].regions) EXPECT_FALSE(p.device_self_ms.has_value());
}

TEST(Series, ACutOfManyRegionsKeepsTheLargestAndSumsTheRest) {
  // 40 top-level regions r0..r39 of i + 1 ms in update 1 and 2 * (i + 1) ms in update 2
  // (wall 2,000 ms): kMaxParts - 1 = 23 parts for the largest (r17..r39, in table
  // order), one for the other 17 (r0..r16: 1 + ... + 17 = 153 ms, and 306 ms), and the
  // outside part: 2,000 - 820 = 1,180 ms and 2,000 - 1,640 = 360 ms.
  Builder b;
  std::string nesting;
  for (int step = 1; step <= 2; ++step) {
    auto& u = b.add(step, 2000);  // (a reference into the builder: used before the next add)
    for (int i = 0; i < 40; ++i) {
      const std::string name = "r" + std::to_string(i);
      b.region(u, name, step * (i + 1.0), step * (i + 1.0));
      if (step == 1) nesting += name + "\n";
    }
  }
  const Hierarchy h = parse(nesting);
  const AnalysisInput in{b.d, &h};
  const UpdateSeries s = build_series(in, build_report(in));
  const auto& cut = s.ranks[0].breakdowns.at(0);
  ASSERT_EQ(cut.parts.size(), kMaxParts + 1);
  std::vector<std::string> names;
  for (std::size_t k = 0; k + 2 < cut.parts.size(); ++k) names.push_back(cut.parts[k].region);
  std::vector<std::string> expected;
  for (int i = 17; i < 40; ++i) expected.push_back("r" + std::to_string(i));
  EXPECT_EQ(names, expected);
  const StackPart& others = cut.parts[kMaxParts - 1];
  EXPECT_EQ(others.region, "(17 other regions)");
  EXPECT_DOUBLE_EQ(*others.ms[0], 153);
  EXPECT_DOUBLE_EQ(*others.ms[1], 306);
  EXPECT_EQ(cut.parts.back().kind, StackPart::Kind::kOutside);
  EXPECT_DOUBLE_EQ(*cut.parts.back().ms[0], 1180);
  EXPECT_DOUBLE_EQ(*cut.parts.back().ms[1], 360);
}

TEST(Series, CostPerFrameAndRankStepMatrices) {
  Builder b(2);
  // Rank 0: fast path 20 ms for 10 frames, then slow path 60 ms for 10 frames.
  // Rank 1: step 1 only, slow path 30 ms for 5 frames; step 2 missing.
  auto& a1 = b.add(1, 100, 0);
  b.region(a1, "fast", 20.0, 20.0);
  b.region(a1, "comm", 10.0, 12.0);
  b.counter(a1, "fast_frames", 10);
  auto& a2 = b.add(2, 110, 0);
  b.region(a2, "slow", 60.0, 60.0);
  b.region(a2, "comm", 10.0, 15.0);
  b.counter(a2, "slow_frames", 10);
  auto& c1 = b.add(1, 105, 1);
  b.region(c1, "slow", 30.0, 30.0);
  b.region(c1, "comm", 5.0, 7.0);
  b.counter(c1, "slow_frames", 5);
  const Hierarchy h = parse("fast alt=g\nslow alt=g\ncomm role=communication\n");
  const AnalysisInput in{b.d, &h};
  const UpdateSeries s = build_series(in, build_report(in));
  const auto& g = s.ranks[0].paths.at(0);
  EXPECT_EQ(g.unit, "frame");
  EXPECT_DOUBLE_EQ(*g.paths[0].ms_per_unit[0], 2.0);  // 20 / 10
  EXPECT_FALSE(g.paths[0].ms_per_unit[1].has_value());
  EXPECT_DOUBLE_EQ(*g.paths[1].ms_per_unit[1], 6.0);  // 60 / 10
  EXPECT_DOUBLE_EQ(*s.ranks[1].paths[0].paths[1].ms_per_unit[0], 6.0);  // 30 / 5
  EXPECT_EQ(s.steps, (std::vector<std::int64_t>{1, 2}));
  ASSERT_EQ(s.matrices.size(), 2u);
  EXPECT_EQ(s.matrices[0].id, "update_ms");
  EXPECT_DOUBLE_EQ(*s.matrices[0].values[1][0], 105);
  EXPECT_FALSE(s.matrices[0].values[1][1].has_value());  // rank 1 has no step 2
  // Outside communication: wall - comm host = 100 - 12, 110 - 15, 105 - 7.
  EXPECT_EQ(s.matrices[1].id, "outside_comm_ms");
  EXPECT_DOUBLE_EQ(*s.matrices[1].values[0][0], 88);
  EXPECT_DOUBLE_EQ(*s.matrices[1].values[0][1], 95);
  EXPECT_DOUBLE_EQ(*s.matrices[1].values[1][0], 98);
}

TEST(Timeline, NestedSequentialLayout) {
  Builder b = nested();
  const Hierarchy h = parse("top\nouter\n  a\n  b\n");
  const Timeline t = build_timeline({b.d, &h});
  ASSERT_EQ(t.processes.size(), 1u);
  const auto& p = t.processes[0];
  EXPECT_EQ(p.pid, 0);
  EXPECT_EQ(p.name, "rank 0");
  ASSERT_EQ(p.tracks.size(), 2u);  // host, device
  const auto& dev = p.tracks[1];
  EXPECT_EQ(dev.clock, Clock::kDevice);
  // Update 1 at 0 for 100 ms; top [0, 5 ms); outer [5, 95); a [5, 35); b [35, 85).
  // Update 2 at 100 ms; top [100, 105); outer [105, 215); a [105, 145).
  struct Want { const char* name; std::int64_t start, dur; };
  const Want want[] = {{"update 1", 0, 100000}, {"top", 0, 5000},       {"outer", 5000, 90000},
                       {"a", 5000, 30000},      {"b", 35000, 50000},    {"update 2", 100000, 120000},
                       {"top", 100000, 5000},   {"outer", 105000, 110000}, {"a", 105000, 40000}};
  ASSERT_EQ(dev.slices.size(), std::size(want));
  for (std::size_t i = 0; i < dev.slices.size(); ++i) {
    const auto& sl = dev.slices[i];
    EXPECT_EQ(sl.update ? "update " + std::to_string(sl.step) : std::string(sl.region), want[i].name);
    EXPECT_EQ(dev.slices[i].start_us, want[i].start) << want[i].name;
    EXPECT_EQ(dev.slices[i].dur_us, want[i].dur) << want[i].name;
  }
  EXPECT_EQ(*dev.slices[2].calls, 2);
  EXPECT_EQ(p.tracks[0].slices[2].dur_us, 91000);  // host time of outer
  EXPECT_FALSE(t.real_timestamps);
  EXPECT_EQ(t.shrunk_slices, 0u);
}

TEST(Timeline, AbsentParentsChildrenTakeItsPlaceAndOverfullParentsShrink) {
  Builder b;
  auto& u = b.add(1, 100);
  // "mid" absent: its children x, y are laid out directly under "outer".
  b.region(u, "outer", 40.0, std::nullopt);
  b.region(u, "x", 30.0, std::nullopt);
  b.region(u, "y", 30.0, std::nullopt);  // 60 > 40: shrunk by 2/3
  const Hierarchy h = parse("outer\n  mid\n    x\n    y\n");
  const Timeline t = build_timeline({b.d, &h});
  const auto& s = t.processes[0].tracks.at(0).slices;  // device only
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[2].region, "x");
  EXPECT_EQ(s[2].start_us, 0);
  EXPECT_EQ(s[2].dur_us, 20000);
  EXPECT_EQ(s[3].start_us, 20000);
  EXPECT_EQ(s[3].dur_us, 20000);
  EXPECT_NEAR(*s[3].scale, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(t.shrunk_slices, 2u);
}

// A nesting 300 deep is laid out to 256 levels (a crafted trace nested 50,000 deep
// overflowed the stack in the recursive layout).
TEST(Timeline, DeepNestingIsLaidOutTo256Levels) {
  Builder b;
  auto& u = b.add(1, 100);
  std::string nesting;
  for (int i = 0; i < 300; ++i) {
    b.region(u, "n" + std::to_string(i), 50.0, std::nullopt);
    nesting += std::string(static_cast<std::size_t>(i) * 2, ' ') + "n" + std::to_string(i) + "\n";
  }
  const Hierarchy h = parse(nesting);
  const Timeline t = build_timeline({b.d, &h});
  const auto& s = t.processes[0].tracks.at(0).slices;
  ASSERT_EQ(s.size(), 1u + 256u);  // the update, then n0 .. n255, each inside the one before
  EXPECT_EQ(s.back().region, "n255");
  EXPECT_EQ(s.back().dur_us, 50000);
}

TEST(Timeline, StepsAlignAcrossRanksAtTheSlowest) {
  Builder b(2);
  b.add(1, 100, 0);
  b.add(2, 50, 0);
  b.add(1, 130, 1);
  b.add(2, 40, 1);
  const Timeline t = build_timeline({b.d, nullptr});
  // Step 2 starts at 130 ms on both ranks (rank 1 was slower in step 1).
  for (const auto& p : t.processes) {
    const auto& updates = p.tracks.at(0).slices;
    ASSERT_EQ(updates.size(), 2u);
    EXPECT_EQ(updates[0].start_us, 0);
    EXPECT_EQ(updates[1].start_us, 130000);
  }
  EXPECT_EQ(t.processes[1].pid, 1);
}

TEST(Timeline, LoggedStartTimesWhenEveryUpdateHasThem) {
  Builder b;
  auto& u1 = b.add(1, 10);
  u1.extra.push_back({"start_unix_ms", "1000.5"});
  auto& u2 = b.add(2, 10);
  u2.extra.push_back({"start_unix_ms", "1030.5"});
  Timeline t = build_timeline({b.d, nullptr});
  EXPECT_TRUE(t.real_timestamps);
  EXPECT_EQ(t.processes[0].tracks[0].slices[1].start_us, 30000);
  // Overlapping starts (the second inside the first) are not used.
  b.d.ranks[0].updates[1].extra[0].json = "1005";
  t = build_timeline({b.d, nullptr});
  EXPECT_FALSE(t.real_timestamps);
  EXPECT_EQ(t.processes[0].tracks[0].slices[1].start_us, 10000);
}

TEST(Csv, QuotingAndAbsentValues) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, "a,\"b\"", 5.0, std::nullopt);
  b.counter(u, "n", 3);
  b.add(2, 50);
  const AnalysisInput in{b.d, nullptr};
  const Report rep = build_report(in);
  const auto files = render_csv(rep, SeriesBuilder(in, rep));
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].name, "updates.csv");
  EXPECT_EQ(files[0].text,
            "rank,step,wall_ms,outside_regions_ms,padding_fraction,counts.n\r\n"
            "0,1,100,,,3\r\n"
            "0,2,50,,,\r\n");
  EXPECT_EQ(files[1].text,
            "rank,step,region,parent,depth,device_ms,host_ms,calls,device_self_ms,host_self_ms\r\n"
            "0,1,\"a,\"\"b\"\"\",,,5,,1,,\r\n");
}

TEST(Csv, ControlBytesInNamesAreWrittenAsEscapes) {
  Builder b;
  auto& u = b.add(1, 100);
  b.region(u, std::string("a\0b\x1b[2J\tc", 9), 5.0, std::nullopt);
  b.counter(u, std::string("n\x7f", 2), 3);
  const AnalysisInput in{b.d, nullptr};
  const Report rep = build_report(in);
  const auto files = render_csv(rep, SeriesBuilder(in, rep));
  ASSERT_EQ(files.size(), 3u);
  // NUL, ESC and DEL as the text report shows them; the tab is kept (a CSV field may hold it).
  EXPECT_EQ(files[0].text,
            "rank,step,wall_ms,outside_regions_ms,padding_fraction,counts.n\\x7f\r\n"
            "0,1,100,,,3\r\n");
  EXPECT_EQ(files[1].text,
            "rank,step,region,parent,depth,device_ms,host_ms,calls,device_self_ms,host_self_ms\r\n"
            "0,1,a\\x00b\\x1b[2J\tc,,,5,,1,,\r\n");
}

TEST(HtmlEscape, TextAndScriptJson) {
  using detail::html_escape;
  using detail::json_for_script;
  EXPECT_EQ(html_escape("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(html_escape("\"onload='x'&"), "&quot;onload=&#39;x&#39;&amp;");
  // A file name in another encoding made the page (declared UTF-8) invalid UTF-8: every
  // byte that is not part of a well-formed sequence is the text \xNN, as in the text
  // report (it was U+FFFD, which made such names look alike); UTF-8 stays as it is.
  EXPECT_EQ(html_escape("bad\xff\xfe.jsonl"), "bad\\xff\\xfe.jsonl");
  EXPECT_EQ(html_escape("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(html_escape("\xc0\xaf"), "\\xc0\\xaf");                          // overlong '/'
  EXPECT_EQ(html_escape("\xed\xa0\x80"), "\\xed\\xa0\\x80");                // a surrogate
  EXPECT_EQ(html_escape("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");      // above U+10FFFF
  EXPECT_EQ(html_escape("a\xe2\x82"), "a\\xe2\\x82");                        // cut short
  // Control characters: two names that differ only by one (or by a tab and a space) had
  // both become U+FFFD (or looked alike): each is its \xNN, as in the text report.
  EXPECT_EQ(html_escape("a\x01" "b"), "a\\x01b");
  EXPECT_EQ(html_escape("a\x02" "b"), "a\\x02b");
  EXPECT_EQ(html_escape("a\tb a\nb \x7f<"), "a\\x09b a\\x0ab \\x7f&lt;");
  const nlohmann::ordered_json j{{"name", "</script><!--&\u2028\u2029"}};
  const std::string s = json_for_script(j);
  EXPECT_EQ(s, "{\"name\":\"\\u003c/script\\u003e\\u003c!--\\u0026\\\\xe2\\\\x80\\\\xa8\\\\xe2\\\\x80\\\\xa9\"}");
  // (the same JSON, but for the line and paragraph separators, written as the tables do)
  EXPECT_EQ(nlohmann::ordered_json::parse(s)["name"], "</script><!--&\\xe2\\x80\\xa8\\xe2\\x80\\xa9");
  // A right-to-left override in a region name showed "evil" as "live" in the page's
  // tables and charts (found by a helper); the text report writes its bytes as \xNN.
  EXPECT_EQ(html_escape("a\u202eevil\u202c \u2067x\u2069 \xc2\x85"),
            "a\\xe2\\x80\\xaeevil\\xe2\\x80\\xac \\xe2\\x81\\xa7x\\xe2\\x81\\xa9 \\xc2\\x85");
  const nlohmann::ordered_json bidi{{"name", "a\u202eevil\u202c"}};
  EXPECT_EQ(json_for_script(bidi), "{\"name\":\"a\\\\xe2\\\\x80\\\\xaeevil\\\\xe2\\\\x80\\\\xac\"}");
  EXPECT_EQ(nlohmann::ordered_json::parse(json_for_script(bidi))["name"], "a\\xe2\\x80\\xaeevil\\xe2\\x80\\xac");
  // Other control characters were JSON escapes, so a chart's legend drew "new\nline" as
  // two overlapping lines and a tab as a gap (found by a helper): the text \xNN, as the
  // tables write them. A backslash written before an "n" stays two characters.
  const nlohmann::ordered_json controls{{"name", "new\nline\ttab\x01\x1f\x7f \\n \\u0001 \"q\" \u00e9"}};
  EXPECT_EQ(nlohmann::ordered_json::parse(json_for_script(controls))["name"],
            "new\\x0aline\\x09tab\\x01\\x1f\\x7f \\n \\u0001 \"q\" \u00e9");
  EXPECT_EQ(nlohmann::ordered_json::parse(json_for_script(nlohmann::ordered_json{{"a\bb\fc\r", 1}})).begin().key(),
            "a\\x08b\\x0cc\\x0d");
}

TEST(ManyRanks, RankNumbersAsRanges) {
  using stepprof::detail::rank_numbers;
  auto range = [](std::int64_t a, std::int64_t b) {
    std::vector<std::int64_t> v;
    for (auto r = a; r <= b; ++r) v.push_back(r);
    return v;
  };
  EXPECT_EQ(rank_numbers({3, 1, 2}), "1, 2, 3");  // up to 16: every number
  EXPECT_EQ(rank_numbers(range(0, 1023)), "0..1023");
  auto gap = range(0, 1023);
  gap.erase(gap.begin() + 512);  // no rank 512
  gap.push_back(5);              // a repeat is one rank
  EXPECT_EQ(rank_numbers(gap), "0..511, 513..1023");
  auto pairs = range(-2, 20);  // negative ranks (unknown) sort first; runs of two are two numbers
  pairs.erase(pairs.begin() + 4);
  EXPECT_EQ(rank_numbers(pairs), "-2..1, 3..20");
  std::vector<std::int64_t> evens;  // 40 isolated ranks: the first 16, then a count
  for (std::int64_t r = 0; r < 80; r += 2) evens.push_back(r);
  EXPECT_EQ(rank_numbers(evens), "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 and 24 more");
}

TEST(ManyRanks, RowsThatMatter) {
  using stepprof::detail::rows_that_matter;
  const auto none = [](std::size_t) { return false; };
  EXPECT_FALSE(rows_that_matter(32, [](std::size_t i) { return double(i); }, none).has_value());
  // 40 rows keyed by their index: the 8 largest (39..32), then the 3 smallest (2, 1, 0),
  // and row 20 because it is marked; largest key first.
  const auto shown = rows_that_matter(40, [](std::size_t i) { return double(i); }, [](std::size_t i) { return i == 20; });
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ(*shown, (std::vector<std::size_t>{39, 38, 37, 36, 35, 34, 33, 32, 20, 2, 1, 0}));
  // Every row marked: nothing is left out, so no cut table, up to 8 + 24 + 3 rows.
  const auto all = [](std::size_t) { return true; };
  EXPECT_FALSE(rows_that_matter(35, [](std::size_t i) { return double(i); }, all));
  // Beyond that the 24 slowest marked rows after the 8 slowest (a slow pipeline stage of
  // 1,024 ranks made a table of 1,035 rows): 39..8, then the 3 smallest.
  const auto capped = rows_that_matter(40, [](std::size_t i) { return double(i); }, all);
  ASSERT_TRUE(capped.has_value());
  std::vector<std::size_t> want;
  for (std::size_t i = 39; i >= 8; --i) want.push_back(i);
  want.insert(want.end(), {2, 1, 0});
  EXPECT_EQ(*capped, want);
}

// The JSON report is written a member at a time (JsonWriter); every document must come
// out byte for byte as nlohmann::json writes the whole tree (dump_json).
TEST(JsonWriter, WritesWhatTheWholeTreeDumpsTo) {
  using stepprof::detail::Json;
  using stepprof::detail::JsonWriter;
  Json inner = Json::object();
  inner["empty_object"] = Json::object();
  inner["empty_array"] = Json::array();
  inner["text"] = "line\nbreak \"quoted\" \xff bad utf-8";
  inner["nested"] = {{"a", {1, 2, {{"b", nullptr}}}}, {"c", 2.5}};
  Json per_rank = Json::array();
  for (int r = 0; r < 3; ++r) per_rank.push_back({{"rank", r}, {"x", {r, Json::object()}}});
  const Json whole = {{"schema", "s/1"}, {"inner", inner}, {"list", per_rank}, {"none", Json::array()},
                      {"head", {{"first", 1}, {"per_rank", per_rank}, {"last", Json::object()}}},
                      {"empty_head", {{"per_rank", Json::array()}}}};
  std::vector<std::string> pieces;
  JsonWriter w([&](std::string_view piece) {
    pieces.emplace_back(piece);
    return true;
  });
  w.begin_object();
  w.member("schema", "s/1");
  w.member("inner", inner);
  w.key("list");
  w.begin_array();
  for (const auto& e : per_rank) w.value(e);
  w.end_array();
  w.key("none");
  w.begin_array();
  w.end_array();
  w.key("head");
  w.object_with_array({{"first", 1}, {"per_rank", nullptr}, {"last", Json::object()}}, "per_rank", 3,
                      [&](std::size_t i) { return per_rank[i]; });
  w.key("empty_head");
  w.object_with_array({{"per_rank", nullptr}}, "per_rank", 0, [&](std::size_t i) { return per_rank[i]; });
  w.end_object();
  ASSERT_TRUE(w.finish());
  std::string text;
  for (const auto& p : pieces) text += p;
  EXPECT_EQ(text, stepprof::detail::dump_json(whole));
}

// More than a piece (1 MiB) of elements: several pieces, the same text; a write that
// fails stops the document.
TEST(JsonWriter, HandsOverPiecesOfAboutAMebibyteAndStopsWhenAWriteFails) {
  using stepprof::detail::Json;
  using stepprof::detail::JsonWriter;
  Json big = Json::array();
  for (int i = 0; i < 40'000; ++i) big.push_back({{"rank", i}, {"name", std::string(40, static_cast<char>('a' + i % 26))}});
  std::vector<std::size_t> sizes;
  std::string text;
  JsonWriter w([&](std::string_view piece) {
    sizes.push_back(piece.size());
    text += piece;
    return true;
  });
  w.begin_array();
  for (const auto& e : big) w.value(e);
  w.end_array();
  ASSERT_TRUE(w.finish());
  EXPECT_EQ(text, stepprof::detail::dump_json(big));
  ASSERT_GE(sizes.size(), 3u);
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_GE(sizes[i], std::size_t{1} << 20);

  int calls = 0;
  JsonWriter failing([&](std::string_view) { return ++calls > 1 ? false : true; });
  failing.begin_array();
  for (const auto& e : big) failing.value(e);
  failing.end_array();
  EXPECT_FALSE(failing.finish());
  EXPECT_EQ(calls, 2);  // (nothing more is handed over after the failed write)

  // A per-rank array stops being made at the first failed write (a report of 16,384 ranks
  // to /dev/full was made to its end).
  std::size_t made = 0;
  JsonWriter full([](std::string_view) { return false; });
  full.object_with_array({{"per_rank", nullptr}}, "per_rank", big.size(), [&](std::size_t i) {
    ++made;
    return big[i];
  });
  EXPECT_FALSE(full.ok());
  EXPECT_FALSE(full.finish());
  EXPECT_LT(made, big.size() / 2);  // (about 1 MiB of 3.4 MB: the first piece)
}

// Bytes that are no part of valid UTF-8 (a file name in Latin-1; 0x9B is an 8-bit
// terminal's CSI) reached stderr and the text reports raw: they are escaped as \xNN,
// while valid characters, continuation bytes included, are kept. Expected by hand from
// RFC 3629's table of well-formed sequences.
TEST(Printable, BytesThatAreNoValidUtf8AreEscaped) {
  using stepprof::printable;
  EXPECT_EQ(printable("a\x9b" "b"), "a\\x9bb");                       // a lone continuation byte
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");                 // é stays
  EXPECT_EQ(printable("x\xc3"), "x\\xc3");                            // a character cut short
  EXPECT_EQ(printable("\xc3\xa9\xa9"), "\xc3\xa9\\xa9");              // one continuation too many
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                     // an overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");            // a UTF-16 surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");   // above U+10FFFF
  EXPECT_EQ(printable("\xf0\x9f\x98\x80!"), "\xf0\x9f\x98\x80!");     // an emoji stays
  EXPECT_EQ(printable("\xe2\x80\xae"), "\\xe2\\x80\\xae");            // U+202E: a control, as before
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
}
