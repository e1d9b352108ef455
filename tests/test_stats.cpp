// Statistics helpers against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "stepprof/analysis/stats.hpp"

using stepprof::pearson;
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
