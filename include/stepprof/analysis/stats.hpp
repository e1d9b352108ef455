// Descriptive statistics used by every analysis.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace stepprof {

/// Distribution of one quantity over updates. Units are those of the input values.
/// Percentiles interpolate linearly between order statistics (NumPy's default,
/// Hyndman & Fan 1996 type 7). cv = stdev / mean with the sample standard deviation
/// (n - 1 denominator); stdev and cv are 0 for n = 1, and cv is 0 whenever the values
/// do not vary (all zeros too) and NaN when they vary around a mean of exactly 0.
struct Summary {
  std::size_t n = 0;
  double mean = 0, stdev = 0, cv = 0;
  double min = 0, p10 = 0, median = 0, p90 = 0, max = 0;
  double sum = 0;
};

/// Summary of `values` (any order); nullopt when empty.
std::optional<Summary> summarize(std::vector<double> values);

/// The median of `values` (any order; type 7, as Summary::median) without sorting them
/// all (O(n)); nullopt when empty. May reorder `values`.
std::optional<double> median(std::vector<double>& values);

/// 1.4826 x the median absolute deviation of `values` from `centre`: a standard
/// deviation that outliers do not move (it estimates sigma for normal data; Rousseeuw and
/// Croux, JASA 1993). 0 when empty.
double robust_sd(const std::vector<double>& values, double centre);

/// For each value of `x`, the order statistic round(q x (m - 1)) (0-based, ascending;
/// 0 <= q <= 1) of the m values of its window: the `window` values centred on it
/// (window / 2 on each side), fewer at the ends of `x`. Same length as `x`. O(n x
/// window) with a small constant: the window is kept sorted as it slides. Values must
/// not be NaN.
std::vector<double> running_quantile(std::span<const double> x, std::size_t window, double q);

/// The q-quantile (0 <= q <= 1) of sorted values, type 7; `sorted` must be non-empty.
double quantile_sorted(std::span<const double> sorted, double q);

/// Pearson correlation of two equally long series; nullopt when n < 3 or either is constant.
std::optional<double> pearson(std::span<const double> a, std::span<const double> b);

/// The smallest Pearson r of n pairs that differs from 0 at the 5 % level (two-sided
/// t-test): r = t / sqrt(t^2 + n - 2), t the 97.5 % quantile of Student's t with n - 2
/// degrees of freedom (standard table, e.g. NIST/SEMATECH e-Handbook of Statistical
/// Methods, 1.3.6.7.2). 0.997 for n = 3, 0.878 for 5, 0.632 for 10, 0.444 for 20; below
/// 0.36 from n = 31 on, where it returns the value for 30 degrees of freedom's t (2.042)
/// as an upper bound. 1 for n < 3 (no correlation can be told).
double significant_correlation(std::size_t n);

/// Sample standard deviation (n - 1); 0 for n < 2.
double stdev(std::span<const double> v);

}  // namespace stepprof
