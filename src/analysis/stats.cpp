#include "stepprof/analysis/stats.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
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

// stdev / mean; 0 when the values do not vary (all equal, zeros included: n = 1 too);
// NaN when they vary around a mean of 0, where the ratio means nothing.
double coefficient_of_variation(double stdev, double mean) {
  if (stdev == 0) return 0;
  return mean != 0 ? stdev / mean : std::numeric_limits<double>::quiet_NaN();
}


// Neumaier's compensated sum: the rounding error of each addition is carried along,
// so the result is within about one rounding of the exact sum, in any order.
class CompensatedSum {
 public:
  void add(double x) {
    const double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  // An overflowed sum stays infinite (as a plain sum would), not NaN.
  [[nodiscard]] double value() const { return std::isfinite(sum_) ? sum_ + comp_ : sum_; }

 private:
  double sum_ = 0, comp_ = 0;
};

// Compensated sums of a long series in four interleaved chains (each addition waits on
// the one before it in its own chain only), each addition's rounding error found
// without a branch by Knuth's TwoSum (TAOCP vol. 2, 4.2.2), added together at the end.
// `f(i)` gives the i-th term; `also(i)` is called once for each i in the same pass
// (another statistic taken along, so that the series is read once for both).
template <typename Term, typename Also>
double compensated_sum(std::size_t n, Term&& f, Also&& also) {
  double sum[4] = {0, 0, 0, 0}, comp[4] = {0, 0, 0, 0};
  auto add = [&](int lane, double x) {
    const double t = sum[lane] + x;
    const double bp = t - sum[lane];
    comp[lane] += (sum[lane] - (t - bp)) + (x - bp);
    sum[lane] = t;
  };
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    add(0, f(i));
    add(1, f(i + 1));
    add(2, f(i + 2));
    add(3, f(i + 3));
    also(i);
    also(i + 1);
    also(i + 2);
    also(i + 3);
  }
  for (; i < n; ++i) {
    add(0, f(i));
    also(i);
  }
  for (int lane = 0; lane < 4; ++lane)
    if (!std::isfinite(sum[lane])) {  // overflow: one chain in order, as a plain sum would go
      CompensatedSum in_order;
      for (std::size_t j = 0; j < n; ++j) in_order.add(f(j));
      return in_order.value();
    }
  CompensatedSum total;
  for (int lane = 0; lane < 4; ++lane) total.add(sum[lane]);
  for (int lane = 0; lane < 4; ++lane) total.add(comp[lane]);
  return total.value();
}

// The order statistics (0-based ranks, ascending) of a series without sorting it: one
// pass counts the values into kBuckets equal-width buckets between min and max (a
// monotone map, so the r-th smallest value lies in the bucket where the running count
// passes r), a second pass keeps only the values of the buckets that hold a wanted
// rank, and a selection among those few finds each. O(n), and no data-dependent branch
// in the counting pass (a comparison-based selection mispredicts about every other
// step). The counts are kept in four tables, value i in table i % 4, so that runs of
// values in one bucket (a steady series) do not wait on each other's increments.
class OrderStatistics {
 public:
  static constexpr std::size_t kBuckets = 4096;

  OrderStatistics(double min, double max) : min_(min), range_(max - min) {
    scale_ = static_cast<double>(kBuckets) / range_;
    counting_ = range_ > 0 && std::isfinite(scale_) && std::isfinite(range_);
    if (counting_)
      for (auto& c : counts_) c.assign(kBuckets, 0);
  }
  // Counts value `x`, the series' i-th (every value once, before select()).
  void count(std::size_t i, double x) {
    if (counting_) ++counts_[i & 3][bucket_of(x)];
  }
  // The order statistics `ranks` of `v`, whose values were all counted.
  std::vector<double> select(const std::vector<double>& v, const std::vector<std::size_t>& ranks) const {
    std::vector<double> out(ranks.size(), min_);
    if (!(range_ > 0)) return out;  // all equal
    if (!counting_) {               // extreme ranges: select directly
      std::vector<double> copy = v;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(ranks[i]), copy.end());
        out[i] = copy[ranks[i]];
      }
      return out;
    }
    std::vector<std::size_t> start(kBuckets + 1, 0);  // start[b]: values below bucket b
    for (std::size_t b = 0; b < kBuckets; ++b)
      start[b + 1] = start[b] + counts_[0][b] + counts_[1][b] + counts_[2][b] + counts_[3][b];
    // The bucket of each wanted rank, and a slot for that bucket's values.
    std::vector<std::size_t> rank_bucket(ranks.size());
    std::vector<std::int32_t> slot(kBuckets, -1);
    std::vector<std::vector<double>> members;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const std::size_t b =
          static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), ranks[i]) - start.begin()) - 1;
      rank_bucket[i] = b;
      if (slot[b] < 0) {
        slot[b] = static_cast<std::int32_t>(members.size());
        members.emplace_back().reserve(start[b + 1] - start[b]);
      }
    }
    for (double x : v)
      if (const std::int32_t s = slot[bucket_of(x)]; s >= 0) members[static_cast<std::size_t>(s)].push_back(x);
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      auto& m = members[static_cast<std::size_t>(slot[rank_bucket[i]])];
      const auto at = m.begin() + static_cast<std::ptrdiff_t>(ranks[i] - start[rank_bucket[i]]);
      std::nth_element(m.begin(), at, m.end());
      out[i] = *at;
    }
    return out;
  }

 private:
  std::size_t bucket_of(double x) const {
    const double b = (x - min_) * scale_;  // in [0, kBuckets]; monotone in x
    return b >= static_cast<double>(kBuckets - 1) ? kBuckets - 1 : static_cast<std::size_t>(b);
  }

  double min_, range_, scale_ = 0;
  bool counting_ = false;
  std::array<std::vector<std::uint32_t>, 4> counts_;  // (a series of 2^34 values or more would not fit in memory)
};

std::vector<double> order_statistics(const std::vector<double>& v, double min, double max,
                                     const std::vector<std::size_t>& ranks) {
  OrderStatistics os(min, max);
  for (std::size_t i = 0; i < v.size(); ++i) os.count(i, v[i]);
  return os.select(v, ranks);
}

// Summary of a long series in O(n) without sorting it, in three passes: min, max and
// sum; the spread's sum of squares, with the values counted into the quantiles'
// buckets; the quantiles' order statistics (type 7: the values at floor(h) and the
// next one). Sums are compensated.
Summary summarize_long(const std::vector<double>& v) {
  Summary s;
  const std::size_t n = v.size();
  s.n = n;
  double lo = v[0], hi = v[0];  // (the first smallest and the last largest, as std::minmax_element)
  s.sum = compensated_sum(
      n, [&](std::size_t i) { return v[i]; },
      [&](std::size_t i) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] >= hi ? v[i] : hi;
      });
  s.min = lo;
  s.max = hi;
  s.mean = s.sum / static_cast<double>(n);
  OrderStatistics os(s.min, s.max);
  const double ss = compensated_sum(
      n, [&](std::size_t i) { return (v[i] - s.mean) * (v[i] - s.mean); }, [&](std::size_t i) { os.count(i, v[i]); });
  s.stdev = std::sqrt(ss / static_cast<double>(n - 1));
  s.cv = coefficient_of_variation(s.stdev, s.mean);
  constexpr std::array<double, 3> qs = {0.10, 0.50, 0.90};
  std::vector<std::size_t> ranks;
  for (double q : qs) {
    const auto k = static_cast<std::size_t>(std::floor((static_cast<double>(n) - 1.0) * q));
    ranks.push_back(k);
    ranks.push_back(std::min(k + 1, n - 1));
  }
  const auto x = os.select(v, ranks);
  double* out[3] = {&s.p10, &s.median, &s.p90};
  for (std::size_t i = 0; i < qs.size(); ++i) {
    const double h = (static_cast<double>(n) - 1.0) * qs[i];
    const double a = x[2 * i], b = x[2 * i + 1];
    *out[i] = a + (h - std::floor(h)) * (b - a);  // as quantile_sorted
  }
  return s;
}

}  // namespace

// Series at least this long are summarized, and their median found, by the bucket
// selection above (a comparison-based selection mispredicts about every other step).
constexpr std::size_t kLongFrom = 4096;

double robust_sd(const std::vector<double>& values, double centre) {
  std::vector<double> dev;
  dev.reserve(values.size());
  for (const double x : values) dev.push_back(std::fabs(x - centre));
  return 1.4826 * median(dev).value_or(0.0);
}

std::optional<double> median(std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  // quantile_sorted(0.5): the order statistic at floor((n-1)/2), interpolated with the
  // next one when n is even.
  const std::size_t n = values.size(), lo = (n - 1) / 2;
  if (n >= kLongFrom) {
    const auto [min, max] = std::minmax_element(values.begin(), values.end());
    const auto x = order_statistics(values, *min, *max, {lo, std::min(lo + 1, n - 1)});
    return n % 2 == 1 ? x[0] : x[0] + 0.5 * (x[1] - x[0]);
  }
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
  if (values.size() >= kLongFrom) return summarize_long(values);
  std::sort(values.begin(), values.end());
  Summary s;
  s.n = values.size();
  s.sum = std::accumulate(values.begin(), values.end(), 0.0);
  s.mean = s.sum / static_cast<double>(s.n);
  s.stdev = stdev(values);
  s.cv = coefficient_of_variation(s.stdev, s.mean);
  s.min = values.front();
  s.max = values.back();
  s.p10 = quantile_sorted(values, 0.10);
  s.median = quantile_sorted(values, 0.50);
  s.p90 = quantile_sorted(values, 0.90);
  return s;
}

std::vector<double> running_quantile(std::span<const double> x, std::size_t window, double q) {
  const std::size_t n = x.size(), half = window / 2;
  std::vector<double> out(n), sorted;  // sorted: x[lo, hi) in ascending order
  sorted.reserve(2 * half + 1);
  std::size_t lo = 0, hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (const std::size_t to = std::min(n, i + half + 1); hi < to; ++hi)
      sorted.insert(std::upper_bound(sorted.begin(), sorted.end(), x[hi]), x[hi]);
    for (const std::size_t from = i >= half ? i - half : 0; lo < from; ++lo) {
      // The leaving value itself (bit for bit: 0.0 and -0.0 compare equal).
      auto at = std::lower_bound(sorted.begin(), sorted.end(), x[lo]);
      for (auto it = at; it != sorted.end() && *it == x[lo]; ++it)
        if (std::memcmp(&*it, &x[lo], sizeof(double)) == 0) {
          at = it;
          break;
        }
      sorted.erase(at);
    }
    const auto k = static_cast<std::size_t>(std::lround(q * static_cast<double>(sorted.size() - 1)));
    out[i] = sorted[k];
  }
  return out;
}

double significant_correlation(std::size_t n) {
  if (n < 3) return 1.0;
  // t(0.975, df) for df = 1..30 (NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                  2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                  2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  const std::size_t df = n - 2;
  const double t = kT[std::min(df, std::size(kT)) - 1];
  return t / std::sqrt(t * t + static_cast<double>(df));
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
