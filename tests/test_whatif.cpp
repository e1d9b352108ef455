// Cost models and what-if predictions on small hand-built datasets whose answers are
// worked out in the comments (least squares by hand, the what-if formulas of
// docs/whatif.md applied by hand). tests/e2e/test_whatif.py checks the same against
// numpy on noisy data.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include "stepprof/analysis/cost_model.hpp"
#include "stepprof/analysis/least_squares.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "test_util.hpp"

using namespace stepprof;

namespace {

// Builds a dataset rank by rank and update by update.
struct Builder {
  Dataset d;
  Builder() { d.files = {"mem"}; }
  RankLog& rank(std::int64_t r, std::int64_t world) {
    auto& log = d.ranks.emplace_back();
    log.rank = r;
    RunConfig c;
    c.rank = r;
    c.world_size = world;
    log.config = c;
    return log;
  }
  UpdateRecord& add(RankLog& log, std::int64_t step, double wall) {
    auto& u = log.updates.emplace_back();
    u.rank = log.rank;
    u.step = step;
    u.wall_ms = wall;
    return u;
  }
  void region(UpdateRecord& u, std::string_view name, double host, std::int64_t calls = 1) {
    test::add_region(d, u, name, std::nullopt, host, calls);
  }
  void counter(UpdateRecord& u, std::string_view name, double v) { test::add_counter(d, u, name, v); }
  void microbatch(UpdateRecord& u, std::string_view path, std::vector<std::int64_t> frames,
                  std::vector<std::int64_t> tokens = {}) {
    MicroBatch mb;
    mb.path = d.regions.intern(path);
    mb.frames = std::move(frames);
    mb.tokens = std::move(tokens);
    u.microbatches.push_back(std::move(mb));
  }
};

Hierarchy parse(const std::string& text) {
  Diagnostics diag;
  auto h = parse_hierarchy(text, "test", diag);
  EXPECT_TRUE(h);
  return *h;
}

MatrixView view(const std::vector<double>& a, std::size_t rows, std::size_t cols) { return {a, rows, cols}; }

const Feature& feature(const CostModelSet& s, const CostTerm& t) { return s.space.features[t.feature]; }

}  // namespace

// ---- least squares ----------------------------------------------------------------------

TEST(Nnls, ConsistentSystemIsSolvedExactly) {
  // x1 = 1, x2 = 2, x1 + x2 = 3.
  const std::vector<double> a{1, 0, 0, 1, 1, 1}, b{1, 2, 3};
  const auto x = nnls(view(a, 3, 2), b);
  EXPECT_NEAR(x[0], 1.0, 1e-12);
  EXPECT_NEAR(x[1], 2.0, 1e-12);
}

TEST(Nnls, NegativeUnconstrainedSlopeIsClampedToZero) {
  // b = 3, 2, 1 against (1, t) for t = 1, 2, 3: least squares gives 4 - t (slope -1).
  // With slope >= 0 the optimum has slope 0 and intercept mean(b) = 2; the gradient of the
  // zero coefficient, t . (b - 2) = 1 - 3 = -2, is <= 0 (Kuhn-Tucker), so it stays 0.
  const std::vector<double> a{1, 1, 1, 2, 1, 3}, b{3, 2, 1};
  const auto x = nnls(view(a, 3, 2), b);
  EXPECT_NEAR(x[0], 2.0, 1e-12);
  EXPECT_EQ(x[1], 0.0);
}

TEST(Nnls, CollinearColumnsGiveOneNonNegativeSolution) {
  // The second column is twice the first; any x >= 0 with x1 + 2 x2 = 2 fits exactly.
  const std::vector<double> a{1, 2, 2, 4, 3, 6}, b{2, 4, 6};
  const auto x = nnls(view(a, 3, 2), b);
  EXPECT_GE(x[0], 0.0);
  EXPECT_GE(x[1], 0.0);
  EXPECT_NEAR(x[0] + 2 * x[1], 2.0, 1e-9);
}

TEST(Nnls, ScalesOfColumnsDoNotMatter) {
  // token slots ~ 5e4 next to calls ~ 1: b = 0.05 slots + 80 calls exactly.
  std::vector<double> a, b;
  for (double slots : {48000.0, 49500.0, 50500.0, 47000.0})
    for (double calls : {1.0, 2.0}) {
      a.insert(a.end(), {slots, calls});
      b.push_back(0.05 * slots + 80 * calls);
    }
  const auto x = nnls(view(a, b.size(), 2), b);
  EXPECT_NEAR(x[0], 0.05, 1e-9);
  EXPECT_NEAR(x[1], 80.0, 1e-6);
}

TEST(NnlsGroups, ExactSystemInGroupsIsSolvedExactly) {
  // Steps of 6 ranks each (reduced to 3 rows per step): b = 0.05 slots + 80 calls exactly.
  std::vector<double> a, b;
  std::vector<std::vector<std::size_t>> groups(3);
  for (std::size_t g = 0; g < 3; ++g)
    for (std::size_t r = 0; r < 6; ++r) {
      const double slots = 40000.0 + 1000.0 * static_cast<double>(g * 6 + r), calls = 1.0 + static_cast<double>(r % 2);
      groups[g].push_back(b.size());
      a.insert(a.end(), {slots, calls});
      b.push_back(0.05 * slots + 80 * calls);
    }
  const GroupedRows g = reduce_groups(view(a, b.size(), 2), b, groups);
  EXPECT_EQ(g.first_row.back(), 9u);  // 3 rows (2 columns + b) per group of 6
  const std::vector<std::size_t> picks{2, 0, 2};
  const auto x = nnls_groups(g, picks);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_NEAR(x[0], 0.05, 1e-9);
  EXPECT_NEAR(x[1], 80.0, 1e-6);
}

TEST(NnlsGroups, RepeatedGroupsWeighTheirRowsByHand) {
  // Columns (1, t), t = 1..4 in both groups; group 0: b = 10, 9, 8, 7; group 1: b = 4, 3,
  // 2, 1. Within each group the slope is -1 and t has the same mean, so the pooled
  // least-squares slope is -1; with slope >= 0 it is 0 and the intercept is the mean of b
  // over the picked rows: picks {0, 0, 1} give (2 x 8.5 + 2.5) / 3 = 6.5.
  const std::vector<double> a{1, 1, 1, 2, 1, 3, 1, 4, 1, 1, 1, 2, 1, 3, 1, 4}, b{10, 9, 8, 7, 4, 3, 2, 1};
  const GroupedRows g = reduce_groups(view(a, 8, 2), b, {{0, 1, 2, 3}, {4, 5, 6, 7}});
  const std::vector<std::size_t> picks{0, 0, 1};
  const auto x = nnls_groups(g, picks);
  EXPECT_NEAR(x[0], 6.5, 1e-12);
  EXPECT_EQ(x[1], 0.0);
}

TEST(NnlsGroups, SameAsNnlsOnTheStackedRows) {
  // Random steps of 1 to 9 ranks (groups of up to 4 rows are kept as they are), three
  // columns, one of them hurting the fit (its coefficient clamps to 0); a bootstrap-like
  // pick with repeats. The reference is nnls() on the picked rows stacked one by one.
  std::mt19937_64 gen(7);
  auto below = [&](std::uint64_t n) { return static_cast<std::size_t>(gen() % n); };
  std::vector<double> a, b;
  std::vector<std::vector<std::size_t>> groups(12);
  for (auto& grp : groups) {
    const std::size_t m = 1 + below(9);
    for (std::size_t r = 0; r < m; ++r) {
      const auto f = static_cast<double>(1 + below(9)), t = static_cast<double>(1000 + below(5000)),
                 c = static_cast<double>(below(3));
      grp.push_back(b.size());
      a.insert(a.end(), {f, t, c});
      b.push_back(3.0 * f + 0.01 * t - 0.5 * c + 0.001 * static_cast<double>(below(100)));
    }
  }
  const GroupedRows g = reduce_groups(view(a, b.size(), 3), b, groups);
  for (std::uint64_t rep = 0; rep < 5; ++rep) {
    std::vector<std::size_t> picks;
    std::vector<double> sa, sb;
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const std::size_t p = below(groups.size());
      picks.push_back(p);
      for (const std::size_t r : groups[p]) {
        sa.insert(sa.end(), a.begin() + static_cast<std::ptrdiff_t>(3 * r), a.begin() + static_cast<std::ptrdiff_t>(3 * r + 3));
        sb.push_back(b[r]);
      }
    }
    const auto want = nnls(view(sa, sb.size(), 3), sb);
    const auto got = nnls_groups(g, picks);
    ASSERT_EQ(got.size(), 3u);
    for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(got[j], want[j], 1e-9 * std::max(1.0, std::abs(want[j]))) << j;
    EXPECT_EQ(got[2], 0.0);
  }
}

TEST(NnlsGroups, NoSuchGroupThrows) {
  const std::vector<double> a{1, 2}, b{1, 2};
  const GroupedRows g = reduce_groups(view(a, 2, 1), b, {{0, 1}});
  const std::vector<std::size_t> picks{1};
  EXPECT_THROW(nnls_groups(g, picks), std::out_of_range);
}

TEST(Nnls, LeaveOneOutErrorsByHand) {
  // Intercept only, b = 1, 2, 6: leaving out 1 predicts mean(2, 6) = 4 (error -3), leaving
  // out 2 predicts 3.5 (-1.5), leaving out 6 predicts 1.5 (4.5).
  const std::vector<double> a{1, 1, 1}, b{1, 2, 6};
  const auto e = nnls_loo_errors(view(a, 3, 1), b);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NEAR(e[0], -3.0, 1e-12);
  EXPECT_NEAR(e[1], -1.5, 1e-12);
  EXPECT_NEAR(e[2], 4.5, 1e-12);
  EXPECT_NEAR(rms(e), std::sqrt((9 + 2.25 + 20.25) / 3), 1e-12);
}

TEST(Nnls, PressShortcutEqualsRefitsForManyRows) {
  // Beyond kExactLooRows rows the PRESS shortcut is used; for the mean (intercept only)
  // leaving row i out predicts (S - b_i) / (n - 1), so the error is n (b_i - mean) / (n - 1).
  const std::size_t n = kExactLooRows + 44;
  std::vector<double> a(n, 1.0), b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<double>((i * 37) % 101);
  const double sum = std::accumulate(b.begin(), b.end(), 0.0);
  const auto e = nnls_loo_errors(view(a, n, 1), b);
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(e[i], b[i] - (sum - b[i]) / static_cast<double>(n - 1), 1e-9);
}

TEST(SelectColumns, KeepsTheFeatureThatExplainsTheDataAndDropsTheRest) {
  // b = 3 x1 exactly; x0 is unrelated. The first round picks x1 (held-out error 0); no
  // second column can lower an error of 0 by 5 %.
  std::vector<double> a, b;
  const double x0[] = {5, 1, 4, 2, 8, 3}, x1[] = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 6; ++i) {
    a.insert(a.end(), {x0[i], x1[i]});
    b.push_back(3 * x1[i]);
  }
  const Selection s = select_columns(view(a, 6, 2), b);
  ASSERT_EQ(s.columns, std::vector<std::size_t>{1});
  EXPECT_NEAR(s.coef[0], 3.0, 1e-12);
  EXPECT_NEAR(s.heldout_rmse, 0.0, 1e-9);
  ASSERT_TRUE(s.r2);
  EXPECT_NEAR(*s.r2, 1.0, 1e-12);
}

TEST(SelectColumns, AddsASecondColumnOnlyWhenTheHeldOutErrorDrops) {
  // b = 2 x0 + 10 x1: one column alone leaves an error, both fit exactly.
  std::vector<double> a, b;
  const double x0[] = {1, 2, 3, 4, 5, 6, 7}, x1[] = {1, 0, 1, 1, 0, 0, 1};
  for (int i = 0; i < 7; ++i) {
    a.insert(a.end(), {x0[i], x1[i]});
    b.push_back(2 * x0[i] + 10 * x1[i]);
  }
  const Selection s = select_columns(view(a, 7, 2), b);
  ASSERT_EQ(s.columns.size(), 2u);
  EXPECT_NEAR(s.coef[s.columns[0] == 0 ? 0 : 1], 2.0, 1e-9);
  EXPECT_NEAR(s.coef[s.columns[0] == 0 ? 1 : 0], 10.0, 1e-9);
  EXPECT_EQ(s.steps.size(), 2u);
}

// ---- cost models and what-ifs ---------------------------------------------------------------

namespace {

// One rank of a single-rank job, six updates of two micro-batches of two samples each:
// micro-batch 1 takes the batched path "fast" (2 ms per frame), micro-batch 2 the
// per-sample path "slow" (5 ms per frame, one call per sample); "lang" costs 0.5 ms per
// token slot. wall_ms = 100 + fast + slow + lang.
constexpr std::int64_t kFastF[] = {9, 4, 6, 9, 7, 5};
constexpr std::int64_t kSlowA[] = {3, 2, 1, 5, 4, 2};
constexpr std::int64_t kSlowB[] = {9, 7, 9, 8, 6, 9};
// max(a, b) and a + b of micro-batch 2 of update k, as doubles.
double mx(int k) { return static_cast<double>(std::max(kSlowA[k], kSlowB[k])); }
double sum(int k) { return static_cast<double>(kSlowA[k] + kSlowB[k]); }
constexpr double kSlots[] = {400, 380, 420, 410, 390, 405};
constexpr double kValid[] = {300, 290, 330, 350, 310, 320};

const char* const kNesting =
    "step\n  geometry\n    fast alt=geometry\n    slow alt=geometry\n  lang\n  sync role=communication\n";

Dataset one_rank_job(std::int64_t world, const std::vector<double>& comm = {}) {
  Builder b;
  auto& log = b.rank(0, world);
  for (int k = 0; k < 6; ++k) {
    const double fast = 4.0 * static_cast<double>(kFastF[k]), slow = 5.0 * sum(k), lang = 0.5 * kSlots[k];
    const double c = comm.empty() ? 0.0 : comm[k];
    auto& u = b.add(log, k + 1, 100 + fast + slow + lang + c);
    b.region(u, "step", 90 + fast + slow + lang + c);
    b.region(u, "geometry", fast + slow);
    b.region(u, "fast", fast, 1);
    b.region(u, "slow", slow, 2);
    b.region(u, "lang", lang, 2);
    if (!comm.empty()) b.region(u, "sync", c, 1);
    b.counter(u, "samples", 4);
    b.counter(u, "frames", static_cast<double>(2 * kFastF[k] + kSlowA[k] + kSlowB[k]));
    b.counter(u, "token_slots", kSlots[k]);
    b.counter(u, "valid_tokens", kValid[k]);
    b.counter(u, "fast_samples", 2);
    b.counter(u, "fast_frames", static_cast<double>(2 * kFastF[k]));
    b.counter(u, "fast_microbatches", 1);
    b.counter(u, "slow_samples", 2);
    b.counter(u, "slow_frames", static_cast<double>(kSlowA[k] + kSlowB[k]));
    b.counter(u, "slow_microbatches", 1);
    u.frame_histogram = {{kFastF[k], 2}};
    b.microbatch(u, "fast", {kFastF[k], kFastF[k]});
    b.microbatch(u, "slow", {kSlowA[k], kSlowB[k]});
  }
  return std::move(b.d);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

TEST(CostModels, RecoverTheCostsOfExactData) {
  const Dataset d = one_rank_job(1);
  const Hierarchy h = parse(kNesting);
  const CostModelSet s = fit_cost_models(AnalysisInput{d, &h});
  const RegionModel* fast = s.find("fast");
  const RegionModel* slow = s.find("slow");
  const RegionModel* lang = s.find("lang");
  ASSERT_TRUE(fast && slow && lang);
  ASSERT_EQ(fast->terms.size(), 1u);
  EXPECT_EQ(feature(s, fast->terms[0]).name, "fast_frames");
  EXPECT_EQ(feature(s, fast->terms[0]).unit, "frame");
  EXPECT_NEAR(fast->terms[0].ms_per_unit, 2.0, 1e-9);
  ASSERT_EQ(slow->terms.size(), 1u);
  EXPECT_EQ(feature(s, slow->terms[0]).name, "slow_frames");
  EXPECT_NEAR(slow->terms[0].ms_per_unit, 5.0, 1e-9);
  ASSERT_EQ(lang->terms.size(), 1u);
  EXPECT_EQ(feature(s, lang->terms[0]).name, "token_slots");
  EXPECT_NEAR(lang->terms[0].ms_per_unit, 0.5, 1e-9);
  for (const auto* m : {fast, slow, lang}) {
    EXPECT_TRUE(m->usable) << m->region << ": " << m->why_not;
    EXPECT_NEAR(m->heldout_rmse_ms, 0.0, 1e-6);
    EXPECT_FALSE(m->device);
  }
  EXPECT_EQ(s.updates, 6u);
  EXPECT_EQ(s.heldout_method, "exact refits");
}

TEST(CostModels, AModelAboveTheThresholdIsNotUsedAndSaysWhy) {
  // "noise" alternates 10 and 30 ms with nothing in the work to explain it. A cost per
  // call (20 ms) has held-out errors of 12 ms (leaving one out of three 10s and three 30s
  // predicts 22 or 18): 12 / 20 = 60 %; selection keeps a feature only if it does at
  // least as well, so the model's held-out error is in (50 %, 60 %]: not used at 50 %,
  // used at a 61 % threshold.
  Dataset d = one_rank_job(1);
  for (std::size_t k = 0; k < 6; ++k) d.ranks[0].updates[k].regions.push_back({d.regions.intern("noise"), std::nullopt, std::nullopt, k % 2 ? 30.0 : 10.0, 1});
  const Hierarchy h = parse(std::string(kNesting) + "  noise\n");
  const CostModelSet s = fit_cost_models(AnalysisInput{d, &h});
  const RegionModel* m = s.find("noise");
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->usable);
  EXPECT_GT(m->heldout_fraction, 0.5);
  EXPECT_LE(m->heldout_fraction, 0.6 + 1e-9);
  EXPECT_NE(m->why_not.find("above the 50 % threshold"), std::string::npos) << m->why_not;
  CostModelOptions lax;
  lax.threshold = 0.61;
  EXPECT_TRUE(fit_cost_models(AnalysisInput{d, &h}, lax).find("noise")->usable);
}

TEST(WhatIf, PadVariantByHand) {
  // Single-rank job: U' = U + D. Padding micro-batch 2 to its largest frame count b puts
  // 2 b frames on "fast" (2 ms each) instead of (a + b) frames on "slow" (5 ms each):
  // D = 4 max(a, b) - 5 (a + b); micro-batch 1 is unchanged.
  const Dataset d = one_rank_job(1);
  const Hierarchy h = parse(kNesting);
  WhatIfOptions o;
  o.scenario = Scenario::kBatchedGeometry;
  o.variant = "pad";
  const WhatIfResult r = run_whatif(AnalysisInput{d, &h}, o);
  ASSERT_EQ(r.predictions.size(), 1u);
  const Prediction& p = r.predictions[0];
  ASSERT_TRUE(p.available) << p.why_not;
  EXPECT_TRUE(r.microbatch_detail);
  EXPECT_FALSE(p.range);
  std::vector<double> measured, predicted;
  for (int k = 0; k < 6; ++k) {
    const double u = d.ranks[0].updates[static_cast<std::size_t>(k)].wall_ms;
    measured.push_back(u);
    predicted.push_back(u + 4.0 * mx(k) - 5.0 * sum(k));
    EXPECT_NEAR(p.updates[static_cast<std::size_t>(k)].predicted_ms, predicted.back(), 1e-6);
  }
  EXPECT_NEAR(p.measured.median_ms, median(measured), 1e-9);
  EXPECT_NEAR(p.predicted.median_ms, median(predicted), 1e-6);
  EXPECT_NEAR(p.saved_ms, median(measured) - median(predicted), 1e-6);
  // The total over 1,000 updates: the mean of the per-update savings, 5 (a + b) - 4 max(a, b).
  double mean_saving = 0;
  for (int k = 0; k < 6; ++k) mean_saving += (5.0 * sum(k) - 4.0 * mx(k)) / 6;
  EXPECT_NEAR(p.saved_mean_ms, mean_saving, 1e-6);
  // Exact data: every bootstrap refit gives the same costs, so the interval is the point
  // up to the resampling of updates (the median of a resample lies within the data).
  EXPECT_LE(p.predicted.low_ms, p.predicted.median_ms);
  EXPECT_GE(p.predicted.high_ms, p.predicted.median_ms);
  EXPECT_GE(p.predicted.low_ms, *std::min_element(predicted.begin(), predicted.end()) - 1e-6);
  EXPECT_LE(p.predicted.high_ms, *std::max_element(predicted.begin(), predicted.end()) + 1e-6);
  // Per region: "slow" loses all its time, "fast" gains 4 max(a, b) on average.
  double fast_gain = 0, slow_time = 0;
  for (int k = 0; k < 6; ++k) {
    fast_gain += 4.0 * mx(k) / 6;
    slow_time += 5.0 * sum(k) / 6;
  }
  for (const auto& rc : p.regions) {
    if (rc.region == "fast") {
      EXPECT_NEAR(rc.change_ms, fast_gain, 1e-6);
    } else if (rc.region == "slow") {
      EXPECT_NEAR(rc.change_ms, -slow_time, 1e-6);
    }
    EXPECT_NE(rc.region, "lang");  // its work does not change
  }
  EXPECT_EQ(*p.samples_per_update, 4.0);  // no global_batch: samples per update x world size 1
}

TEST(WhatIf, FewStepsBoundFollowsTheIntervalsProbability) {
  // The bound by brute force: the smallest n whose order-statistic interval from the 2nd
  // smallest to the 2nd largest covers the median with probability 1 - 2 P(B(n, 1/2) <= 1)
  // = 1 - 2 (C(n, 0) + C(n, 1)) / 2^n, summed from the binomial coefficients.
  const auto brute = [](double central) {
    for (std::size_t n = 3;; ++n) {
      double below = 0, c = 1;  // C(n, k)
      for (std::size_t k = 0; k <= 1; ++k) {
        below += c;
        c = c * static_cast<double>(n - k) / static_cast<double>(k + 1);
      }
      if (1 - 2 * below / std::pow(2.0, static_cast<double>(n)) >= central) return n;
    }
  };
  for (const double central : {0.5, 0.8, 0.9, 0.95, 0.99, 0.999})
    EXPECT_EQ(few_steps_bound(central), brute(central)) << central;
  // A run over 6 steps: too few for 90 % (bound 8), enough for 50 % (bound 5). The note
  // names the configured probability, not 90 %.
  const Dataset d = one_rank_job(1);
  const Hierarchy h = parse(kNesting);
  const auto few_note = [&](double central) -> std::string {
    WhatIfOptions o;
    o.variant = "pad";
    o.interval = central;
    const Prediction p = run_whatif(AnalysisInput{d, &h}, o).predictions.at(0);
    EXPECT_TRUE(p.available) << p.why_not;
    for (const auto& n : p.notes)
      if (n.find("rests on only") != std::string::npos) return n;
    return {};
  };
  EXPECT_EQ(few_note(0.5), "");
  const std::string n80 = few_note(0.8);  // bound 7
  EXPECT_NE(n80.find("too few for a 80 % interval"), std::string::npos) << n80;
  EXPECT_NE(n80.find("fewer than 7 steps"), std::string::npos) << n80;
  EXPECT_NE(n80.find("median with 80 % probability"), std::string::npos) << n80;
}

TEST(WhatIf, GroupVariantDrawsSingleFrameCountMicroBatches) {
  // Every micro-batch gets two samples of one frame count drawn from the window's 24
  // samples, so each update's fast path runs 2 x 2 f frames for some frame counts f in
  // [1, 9]: the change lies between 4 x 2 x 1 - (fast + slow) and 4 x 2 x 9 - (fast + slow).
  const Dataset d = one_rank_job(1);
  const Hierarchy h = parse(kNesting);
  WhatIfOptions o;
  o.variant = "group";
  const Prediction p = run_whatif(AnalysisInput{d, &h}, o).predictions.at(0);
  ASSERT_TRUE(p.available) << p.why_not;
  for (int k = 0; k < 6; ++k) {
    const double u = d.ranks[0].updates[static_cast<std::size_t>(k)].wall_ms;
    const double old = 4.0 * static_cast<double>(kFastF[k]) + 5.0 * sum(k);
    EXPECT_GE(p.updates[static_cast<std::size_t>(k)].predicted_ms, u - old + 2.0 * 4 * 1 - 1e-9);
    EXPECT_LE(p.updates[static_cast<std::size_t>(k)].predicted_ms, u - old + 2.0 * 4 * 9 + 1e-9);
  }
}

TEST(WhatIf, OneRankOfAMultiRankJobGivesARange) {
  // World size 4, one rank's log; the communication region "sync" takes 10 + k ms in
  // update k (k = 0..5), so its wait is w = k (above the lowest, 10). With "fast" at 2 ms
  // per frame, padding can cost more than it saves: D = 4 max(a, b) - 5 (a + b), and
  //   every rank improves alike: U + D;  only this rank improves: U + max(0, D - w).
  const std::vector<double> comm{10, 11, 12, 13, 14, 15};
  const Dataset d = one_rank_job(4, comm);
  const Hierarchy h = parse(kNesting);
  WhatIfOptions o;
  o.variant = "pad";
  const Prediction p = run_whatif(AnalysisInput{d, &h}, o).predictions.at(0);
  ASSERT_TRUE(p.available) << p.why_not;
  ASSERT_TRUE(p.range);
  for (int k = 0; k < 6; ++k) {
    const auto& u = p.updates[static_cast<std::size_t>(k)];
    const double dd = 4.0 * mx(k) - 5.0 * sum(k);
    EXPECT_NEAR(u.predicted_ms, u.measured_ms + dd, 1e-6);
    ASSERT_TRUE(u.only_this_rank_ms);
    EXPECT_NEAR(*u.only_this_rank_ms, u.measured_ms + std::max(0.0, dd - k), 1e-6);
  }
  ASSERT_TRUE(p.only_this_rank);
  EXPECT_GE(p.only_this_rank->median_ms, p.predicted.median_ms);
}

TEST(WhatIf, AllRanksTakeTheSlowestRanksOwnWorkPlusTheCollective) {
  // Two ranks, no-padding: "lang" costs 0.5 ms per token slot, so D = 0.5 (valid - slots).
  // Step k: rank r's own work c = wall - sync; U = max wall;
  //   U' = max_r (c_r + D_r) + (U - max_r c_r).
  Builder b;
  const double slots[2][5] = {{400, 380, 420, 410, 390}, {300, 420, 380, 400, 360}};
  const double valid[2][5] = {{300, 360, 330, 350, 310}, {290, 300, 370, 320, 350}};
  const double other[2][5] = {{50, 60, 40, 55, 45}, {70, 40, 45, 50, 65}};
  for (int r = 0; r < 2; ++r) {
    auto& log = b.rank(r, 2);
    for (int k = 0; k < 5; ++k) {
      const double lang = 0.5 * slots[r][k];
      const double own = other[r][k] + lang;
      // Both ranks leave the collective together, 5 ms after the slower one's work.
      const double slowest = std::max(other[0][k] + 0.5 * slots[0][k], other[1][k] + 0.5 * slots[1][k]);
      const double sync = slowest - own + 5;
      auto& u = b.add(log, k + 1, own + sync);
      b.region(u, "lang", lang, 1);
      b.region(u, "work", other[r][k], 1);
      b.region(u, "sync", sync, 1);
      b.counter(u, "token_slots", slots[r][k]);
      b.counter(u, "valid_tokens", valid[r][k]);
      b.counter(u, "samples", 4);
    }
  }
  const Hierarchy h = parse("lang\nwork\nsync role=communication\n");
  WhatIfOptions o;
  o.scenario = Scenario::kNoPadding;
  const WhatIfResult res = run_whatif(AnalysisInput{b.d, &h}, o);
  const Prediction& p = res.predictions.at(0);
  ASSERT_TRUE(p.available) << p.why_not;
  EXPECT_FALSE(p.range);
  EXPECT_EQ(res.ranks, 2u);
  ASSERT_EQ(p.updates.size(), 5u);
  for (int k = 0; k < 5; ++k) {
    double cmax = 0, cnew = 0;
    for (int r = 0; r < 2; ++r) {
      const double own = other[r][k] + 0.5 * slots[r][k];
      cmax = std::max(cmax, own);
      cnew = std::max(cnew, own + 0.5 * (valid[r][k] - slots[r][k]));
    }
    EXPECT_NEAR(p.updates[static_cast<std::size_t>(k)].measured_ms, cmax + 5, 1e-9);
    EXPECT_NEAR(p.updates[static_cast<std::size_t>(k)].predicted_ms, cnew + 5, 1e-6);
  }
}

TEST(WhatIf, BalancedRanksBringsAStragglerToTheMedianRank) {
  // Three ranks with the same work (8 samples per update); rank 2 takes 200 ms of own
  // work, the others 100 ms; all leave the collective at 210 ms. Work is equal, so the
  // time per unit of work is 100, 100 and 200 per 8 samples; the median rank's is 100:
  // every rank's own work becomes 100 and each step 100 + (210 - 200) = 110 ms.
  Builder b;
  for (int r = 0; r < 3; ++r) {
    auto& log = b.rank(r, 3);
    const double own = r == 2 ? 200 : 100;
    for (int k = 0; k < 4; ++k) {
      auto& u = b.add(log, k + 1, 210);
      b.region(u, "work", own);
      b.region(u, "sync", 210 - own);
      b.counter(u, "samples", 8);
    }
  }
  const Hierarchy h = parse("work\nsync role=communication\n");
  WhatIfOptions o;
  o.scenario = Scenario::kBalancedRanks;
  const Prediction p = run_whatif(AnalysisInput{b.d, &h}, o).predictions.at(0);
  ASSERT_TRUE(p.available) << p.why_not;
  EXPECT_NEAR(p.measured.median_ms, 210, 1e-9);
  EXPECT_NEAR(p.predicted.median_ms, 110, 1e-6);
  EXPECT_NEAR(p.saved_ms, 100, 1e-6);
  ASSERT_EQ(p.ranks.size(), 3u);
  EXPECT_NEAR(p.ranks[0].relative_time, 1.0, 1e-9);
  EXPECT_NEAR(p.ranks[2].relative_time, 2.0, 1e-9);
  EXPECT_NEAR(p.ranks[2].work_share, 1.0, 1e-9);
}

TEST(WhatIf, BalancedRanksMovesWorkWhenRanksDifferInWork) {
  // Same speed (10 ms per sample), different work: ranks get 6, 8 and 16 samples, own
  // work 60, 80, 160 ms, collective 5 ms after the slowest. The mean work is 10 samples:
  // every rank's own work becomes 100 ms and each step 105 ms (the issue's "every rank's
  // compute equals the mean").
  Builder b;
  const double samples[] = {6, 8, 16};
  for (int r = 0; r < 3; ++r) {
    auto& log = b.rank(r, 3);
    for (int k = 0; k < 5; ++k) {
      auto& u = b.add(log, k + 1, 165);
      b.region(u, "work", 10 * samples[r]);
      b.region(u, "sync", 165 - 10 * samples[r]);
      b.counter(u, "samples", samples[r]);
    }
  }
  const Hierarchy h = parse("work\nsync role=communication\n");
  WhatIfOptions o;
  o.scenario = Scenario::kBalancedRanks;
  const Prediction p = run_whatif(AnalysisInput{b.d, &h}, o).predictions.at(0);
  ASSERT_TRUE(p.available) << p.why_not;
  EXPECT_NEAR(p.predicted.median_ms, 105, 1e-6);
  EXPECT_NEAR(p.ranks[2].work_share, 1.6, 1e-9);
  EXPECT_NEAR(p.ranks[2].relative_time, 1.0, 1e-9);
}

TEST(WhatIf, ScenariosSayWhyTheyCannotRun) {
  const Dataset d = one_rank_job(1);
  const Hierarchy h = parse(kNesting);
  WhatIfOptions o;
  o.scenario = Scenario::kBalancedRanks;
  const Prediction p = run_whatif(AnalysisInput{d, &h}, o).predictions.at(0);
  EXPECT_FALSE(p.available);
  EXPECT_NE(p.why_not.find("world size is 1: there are no ranks to balance"), std::string::npos) << p.why_not;
  {  // one rank's log of a job of 4 ranks
    const Dataset one_of_four = one_rank_job(4);
    const Prediction q = run_whatif(AnalysisInput{one_of_four, &h}, o).predictions.at(0);
    EXPECT_FALSE(q.available);
    EXPECT_NE(q.why_not.find("every rank's log"), std::string::npos) << q.why_not;
  }
  o.scenario = Scenario::kBatchedGeometry;
  const Prediction q = run_whatif(AnalysisInput{d, nullptr}, o).predictions.at(0);
  EXPECT_FALSE(q.available);
  EXPECT_NE(q.why_not.find("nesting"), std::string::npos);
  o.path = "lang";
  const Prediction r = run_whatif(AnalysisInput{d, &h}, o).predictions.at(0);
  EXPECT_FALSE(r.available);
  EXPECT_NE(r.why_not.find("lang is not a path of group geometry"), std::string::npos) << r.why_not;
}

// The group variant's replay of `data`, with what it points to (the dataset, the input
// and the cost models fitted on it).
struct GroupReplay {
  GroupReplay(Dataset data, const Hierarchy& h)
      : d(std::move(data)), in{d, &h}, models(fit_cost_models(in)), replay(in, models, WhatIfOptions{}, "group") {}
  Dataset d;
  AnalysisInput in;
  CostModelSet models;
  WhatIfReplay replay;
};

TEST(WhatIf, ReplayCountsEverySample) {
  const Hierarchy h = parse(kNesting);  // (the input points to it)
  GroupReplay g(one_rank_job(1), h);
  ASSERT_TRUE(g.replay.available()) << g.replay.why_not();
  std::vector<double> change;
  EXPECT_EQ(g.replay.replay(7, change), 24u);  // 6 updates x 4 samples
  EXPECT_EQ(change.size(), 6u);
}

// A frame histogram is expanded one entry per sample: one whose counts disagree with the
// update's samples counter ({"9": 2^62} beside 16 samples, from a hand-edited log) took
// every byte of memory. Such a histogram is not used, and the variant says why.
TEST(WhatIf, AHistogramThatDisagreesWithTheSamplesCounterIsNotExpanded) {
  Dataset d = one_rank_job(1);
  for (auto& u : d.ranks[0].updates) {
    u.microbatches.clear();  // (the replay then rebuilds micro-batches from the histogram)
    u.frame_histogram = {{3, 1}, {5, 3}};  // 4 samples, as the samples counter says
  }
  const Hierarchy h = parse(kNesting);
  {
    GroupReplay g(d, h);
    ASSERT_TRUE(g.replay.available()) << g.replay.why_not();
    std::vector<double> change;
    EXPECT_EQ(g.replay.replay(7, change), 24u);  // 6 updates x 4 samples
  }
  // An update without a histogram has no samples to expand: no disagreement (and with no
  // histogram anywhere, the variant says that it needs one).
  {
    Dataset one_without = d;
    one_without.ranks[0].updates[4].frame_histogram.clear();
    GroupReplay g(std::move(one_without), h);
    EXPECT_TRUE(g.replay.available()) << g.replay.why_not();
    Dataset none = d;
    for (auto& u : none.ranks[0].updates) u.frame_histogram.clear();
    GroupReplay no(std::move(none), h);
    EXPECT_FALSE(no.replay.available());
    EXPECT_NE(no.replay.why_not().find("replays the samples' frame counts, from the frame_histogram"), std::string::npos)
        << no.replay.why_not();
  }
  d.ranks[0].updates[2].frame_histogram = {{9, std::int64_t{1} << 32}};
  GroupReplay g(std::move(d), h);
  const WhatIfReplay& replay = g.replay;
  EXPECT_FALSE(replay.available());
  EXPECT_NE(replay.why_not().find("the frame_histogram disagrees with the samples counter in 1 of 6 updates (first: "
                                  "rank 0 step 3: 4294967296 samples in the histogram, 4 in the samples counter)"),
            std::string::npos)
      << replay.why_not();
}
