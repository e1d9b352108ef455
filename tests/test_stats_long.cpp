// Summaries of long series (>= 4096 values: every update of every rank) are computed
// without sorting. Checked against a reference written out here: sort, then the
// type-7 quantile formula (Hyndman & Fan 1996), and a sum in long double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "stepprof/analysis/stats.hpp"

using namespace stepprof;

namespace {

struct Reference {
  double min, max, p10, median, p90, mean, stdev;
};

Reference reference(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    const double h = (static_cast<double>(v.size()) - 1) * p;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  long double sum = 0;
  for (double x : v) sum += x;
  const long double mean = sum / static_cast<long double>(v.size());
  long double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {v.front(), v.back(), q(0.1), q(0.5), q(0.9), static_cast<double>(mean),
          static_cast<double>(std::sqrt(ss / static_cast<long double>(v.size() - 1)))};
}

void expect_matches(const std::vector<double>& v, const char* what) {
  const auto s = summarize(v);
  const auto r = reference(v);
  ASSERT_TRUE(s) << what;
  EXPECT_EQ(s->n, v.size()) << what;
  // Order statistics are exact.
  EXPECT_EQ(s->min, r.min) << what;
  EXPECT_EQ(s->max, r.max) << what;
  EXPECT_EQ(s->p10, r.p10) << what;
  EXPECT_EQ(s->median, r.median) << what;
  EXPECT_EQ(s->p90, r.p90) << what;
  // Sums are compensated: within a few roundings of the exact value.
  const double scale = std::max(1.0, std::fabs(r.mean));
  EXPECT_NEAR(s->mean, r.mean, 1e-13 * scale) << what;
  if (std::isfinite(r.stdev * r.stdev))  // else the squares overflow a double: inf, as the short path gives
    EXPECT_NEAR(s->stdev, r.stdev, 1e-9 * std::max(1e-300, r.stdev) + 1e-12 * scale) << what;
  else
    EXPECT_TRUE(std::isinf(s->stdev)) << what;
  std::vector<double> copy = v;
  const auto m = median(copy);
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, r.median) << what;
}

}  // namespace

TEST(StatsLong, MatchesSortedReferenceOnManyShapes) {
  std::mt19937_64 rng(7);
  for (std::size_t n : {4096u, 4097u, 10000u, 65537u}) {
    std::vector<double> normal(n), skewed(n), ints(n), bimodal(n), wide(n), tied(n);
    std::normal_distribution<double> nd(6000, 300);
    std::exponential_distribution<double> ed(0.01);
    std::uniform_int_distribution<int> id(0, 20);
    std::uniform_real_distribution<double> ud(-1e12, 1e12);
    for (std::size_t i = 0; i < n; ++i) {
      normal[i] = nd(rng);
      skewed[i] = ed(rng);
      ints[i] = id(rng);
      bimodal[i] = (i % 3 == 0) ? 3000 + nd(rng) / 100 : 9000 + nd(rng) / 100;
      wide[i] = ud(rng) * (i % 2 ? 1e-200 : 1);
      tied[i] = (i % 5 == 0) ? 1.5 : 0.25;
    }
    expect_matches(normal, "normal");
    expect_matches(skewed, "exponential");
    expect_matches(ints, "small integers");
    expect_matches(bimodal, "bimodal");
    expect_matches(wide, "wide range");
    expect_matches(tied, "two values");
    expect_matches(std::vector<double>(n, 42.0), "constant");
    std::vector<double> ascending = normal;  // runs of values in one bucket
    std::sort(ascending.begin(), ascending.end());
    expect_matches(ascending, "ascending");
    expect_matches(std::vector<double>(ascending.rbegin(), ascending.rend()), "descending");
    std::vector<double> extreme(n, 0.0);
    extreme[0] = -1.7e308;
    extreme[1] = 1.7e308;  // max - min overflows: selected directly
    expect_matches(extreme, "extreme range");
  }
}

TEST(StatsLong, ShortAndLongAgreeOnOrderStatistics) {
  // The same values summarized as 4095 (sorted path) and 4096 (selection path) values.
  std::vector<double> v;
  for (int i = 0; i < 4095; ++i) v.push_back(std::fmod(i * 7919.0, 1000.0) / 7.0);
  const auto a = summarize(v);
  v.push_back(v.back());
  const auto b = summarize(v);
  const auto ra = reference(std::vector<double>(v.begin(), v.end() - 1));
  EXPECT_EQ(a->median, ra.median);
  EXPECT_EQ(b->median, reference(v).median);
}

TEST(StatsLong, AnOverflowedSumStaysInfinite) {
  // In order, the sum overflows at the second value and stays +inf (a plain sum does
  // too); summing in interleaved chains must not turn it into NaN or 0.
  std::vector<double> v;
  for (int i = 0; i < 1024; ++i)
    for (double x : {1e308, 1e308, -1e308, -1e308}) v.push_back(x);
  double plain = 0;
  for (double x : v) plain += x;
  ASSERT_TRUE(std::isinf(plain));
  const auto s = summarize(v);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->sum, plain);
}
