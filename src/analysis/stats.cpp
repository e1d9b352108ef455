#include "stepprof/analysis/stats.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <numeric>

namespace stepprof {

double quantile_sorted(std::span<const double> sorted, double q) {
  const double h = (static_cast<double>(sorted.size()) - 1.0) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double stdev(std::span<const double> v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

namespace {

// Neumaier's compensated sum: the rounding error of each addition is carried along,
// so the result is within about one rounding of the exact sum, in any order.
class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  [[nodiscard]] double value() const { return sum_ + comp_; }

 private:
  double sum_ = 0, comp_ = 0;
};

// Summary of a long series in O(n) without sorting it: min and max by one scan, the
// three quantiles by selection (each needs the order statistics at floor(h) and the
// next one, type 7), sum and spread by compensated sums. Reorders `v`.
Summary summarize_long(std::vector<double>& v) {
  Summary s;
  bool sorted = false;
  const std::size_t n = v.size();
  s.n = n;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.min = *lo;
  s.max = *hi;
  // Counts (such as calls) are integers in a small range: sort them by counting.
  constexpr double kCountRange = 1 << 16;
  if (s.max - s.min < kCountRange &&
      std::all_of(v.begin(), v.end(), [](double x) { return x == std::nearbyint(x) && !(x == 0 && std::signbit(x)); })) {
    std::vector<std::size_t> count(static_cast<std::size_t>(s.max - s.min) + 1, 0);
    for (double x : v) ++count[static_cast<std::size_t>(x - s.min)];
    std::size_t i = 0;
    for (std::size_t d = 0; d < count.size(); ++d)
      for (std::size_t c = count[d]; c > 0; --c) v[i++] = s.min + static_cast<double>(d);
    sorted = true;
  }
  CompensatedSum sum;
  for (double x : v) sum.add(x);
  s.sum = sum.value();
  s.mean = s.sum / static_cast<double>(n);
  CompensatedSum ss;
  for (double x : v) ss.add((x - s.mean) * (x - s.mean));
  s.stdev = std::sqrt(ss.value() / static_cast<double>(n - 1));
  s.cv = s.mean != 0 ? s.stdev / s.mean : 0;
  // Ascending quantiles: each selection works on what lies above the previous one.
  auto from = v.begin();
  auto quantile = [&](double q) {
    const double h = (static_cast<double>(n) - 1.0) * q;
    const auto k = static_cast<std::size_t>(std::floor(h));
    const auto at = v.begin() + static_cast<std::ptrdiff_t>(k);
    std::nth_element(from, at, v.end());
    const double a = *at;
    const double b = k + 1 < n ? *std::min_element(at + 1, v.end()) : a;
    from = at + 1;
    return a + (h - static_cast<double>(k)) * (b - a);
  };
  if (sorted) {
    s.p10 = quantile_sorted(v, 0.10);
    s.median = quantile_sorted(v, 0.50);
    s.p90 = quantile_sorted(v, 0.90);
  } else {
    s.p10 = quantile(0.10);
    s.median = quantile(0.50);
    s.p90 = quantile(0.90);
  }
  return s;
}

}  // namespace

std::optional<double> median(std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  // quantile_sorted(0.5): the order statistic at floor((n-1)/2), interpolated with the
  // next one when n is even.
  const std::size_t n = values.size(), lo = (n - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double a = values[lo];
  if (n % 2 == 1) return a;
  const double b = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo) + 1, values.end());
  return a + 0.5 * (b - a);
}

std::optional<Summary> summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  // Long series (every update of every rank: millions of values) are summarized
  // without sorting; their sum may differ from the sorted sum below in the last digit.
  constexpr std::size_t kLongFrom = 4096;
  if (values.size() >= kLongFrom) return summarize_long(values);
  std::sort(values.begin(), values.end());
  Summary s;
  s.n = values.size();
  s.sum = std::accumulate(values.begin(), values.end(), 0.0);
  s.mean = s.sum / static_cast<double>(s.n);
  s.stdev = stdev(values);
  s.cv = s.mean != 0 ? s.stdev / s.mean : 0;
  s.min = values.front();
  s.max = values.back();
  s.p10 = quantile_sorted(values, 0.10);
  s.median = quantile_sorted(values, 0.50);
  s.p90 = quantile_sorted(values, 0.90);
  return s;
}

std::optional<double> pearson(std::span<const double> a, std::span<const double> b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n < 3) return std::nullopt;
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ma += a[i];
    mb += b[i];
  }
  ma /= static_cast<double>(n);
  mb /= static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa <= 0 || sbb <= 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

}  // namespace stepprof
