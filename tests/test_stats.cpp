// Statistics helpers against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "stepprof/analysis/stats.hpp"

using stepprof::pearson;
using stepprof::running_quantile;
using stepprof::summarize;

TEST(Stats, EmptyHasNoSummary) { EXPECT_FALSE(summarize({}).has_value()); }

TEST(Stats, PercentilesInterpolateLinearly) {
  // Sorted: 1 2 3 4 10. Type 7: p10 at h = 0.4 -> 1 + 0.4 * (2 - 1) = 1.4;
  // p90 at h = 3.6 -> 4 + 0.6 * (10 - 4) = 7.6; median = 3.
  const auto s = summarize({10, 3, 1, 4, 2});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->n, 5u);
  EXPECT_DOUBLE_EQ(s->min, 1);
  EXPECT_DOUBLE_EQ(s->max, 10);
  EXPECT_DOUBLE_EQ(s->median, 3);
  EXPECT_NEAR(s->p10, 1.4, 1e-12);
  EXPECT_NEAR(s->p90, 7.6, 1e-12);
  EXPECT_DOUBLE_EQ(s->mean, 4);
  // Sample variance: deviations -3 -2 -1 0 6 -> (9 + 4 + 1 + 0 + 36) / 4 = 12.5.
  EXPECT_NEAR(s->stdev, std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(s->cv, std::sqrt(12.5) / 4, 1e-12);
}

TEST(Stats, MedianOfEvenCountIsMidpoint) {
  const auto s = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(s->median, 2.5);
}

TEST(Stats, SingleValueHasZeroSpread) {
  const auto s = summarize({7});
  EXPECT_DOUBLE_EQ(s->median, 7);
  EXPECT_DOUBLE_EQ(s->stdev, 0);
  EXPECT_DOUBLE_EQ(s->cv, 0);
}

TEST(Stats, CoefficientOfVariationIsZeroWithoutSpreadAndNaNWithoutAMean) {
  // All zeros (a rank that never waits): no variation, cv 0. Values varying around a
  // mean of exactly 0 (margins of -1 and +1 ms): stdev / mean has no value; it was 0.
  // Both summary paths: short series are sorted, series of 4096 or more are not.
  for (const std::size_t n : {std::size_t{4}, std::size_t{5000}}) {
    const auto zeros = summarize(std::vector<double>(n, 0.0));
    EXPECT_EQ(zeros->cv, 0) << n;
    std::vector<double> around(n);
    for (std::size_t i = 0; i < n; ++i) around[i] = i % 2 ? 1.0 : -1.0;
    const auto a = summarize(around);
    EXPECT_EQ(a->mean, 0) << n;
    EXPECT_GT(a->stdev, 0.99) << n;
    EXPECT_TRUE(std::isnan(a->cv)) << n;
  }
}

TEST(Stats, PearsonOfExactLinesIsPlusMinusOne) {
  const std::vector<double> x{1, 2, 3, 4}, up{3, 5, 7, 9}, down{8, 6, 4, 2};
  EXPECT_NEAR(*pearson(x, up), 1.0, 1e-12);
  EXPECT_NEAR(*pearson(x, down), -1.0, 1e-12);
}

TEST(Stats, PearsonHandComputed) {
  // x = 1 2 3, y = 1 3 2: cov sum = (-1)(-1) + 0 + (1)(0) = 1; sxx = 2, syy = 2 -> r = 0.5.
  const std::vector<double> x{1, 2, 3}, y{1, 3, 2};
  EXPECT_NEAR(*pearson(x, y), 0.5, 1e-12);
}

TEST(Stats, PearsonUndefinedForConstantOrShortSeries) {
  const std::vector<double> c{2, 2, 2}, x{1, 2, 3}, two{1, 2};
  EXPECT_FALSE(pearson(c, x).has_value());
  EXPECT_FALSE(pearson(two, two).has_value());
}

TEST(Stats, RunningQuantileByHand) {
  // Window 3 (one each side), q = 0.5: the middle of each sorted window, the lower of
  // two at the ends (round(0.5 x 1) = 1 rounds half away from zero: the larger).
  // Windows: {5,1} {5,1,4} {1,4,4} {4,4,9} {4,9}.
  const std::vector<double> x = {5, 1, 4, 4, 9};
  EXPECT_EQ(running_quantile(x, 3, 0.5), (std::vector<double>{5, 4, 4, 4, 9}));
  // q = 0: the window's minimum.
  EXPECT_EQ(running_quantile(x, 3, 0.0), (std::vector<double>{1, 1, 1, 4, 4}));
  EXPECT_TRUE(running_quantile(std::vector<double>{}, 11, 0.3).empty());
  EXPECT_EQ(running_quantile(std::vector<double>{2.5}, 11, 0.3), (std::vector<double>{2.5}));
}

TEST(Stats, RunningQuantileAgainstSortingEachWindow) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> small(0, 5);  // many ties
  std::normal_distribution<double> wide(100, 30);
  for (const std::size_t window : {1u, 2u, 3u, 11u, 12u, 40u})
    for (const double q : {0.0, 0.3, 0.5, 1.0})
      for (const std::size_t n : {1u, 5u, 11u, 200u}) {
        std::vector<double> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = (i % 2 ? wide(rng) : small(rng));
        const auto got = running_quantile(x, window, q);
        ASSERT_EQ(got.size(), n);
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t half = window / 2, lo = i >= half ? i - half : 0, hi = std::min(n, i + half + 1);
          std::vector<double> w(x.begin() + static_cast<std::ptrdiff_t>(lo), x.begin() + static_cast<std::ptrdiff_t>(hi));
          std::sort(w.begin(), w.end());
          const auto k = static_cast<std::size_t>(std::lround(q * static_cast<double>(w.size() - 1)));
          EXPECT_EQ(got[i], w[k]) << "window " << window << " q " << q << " n " << n << " i " << i;
        }
      }
}
