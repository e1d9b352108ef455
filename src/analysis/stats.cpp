#include "stepprof/analysis/stats.hpp"

#include <algorithm>
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

std::optional<Summary> summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
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
