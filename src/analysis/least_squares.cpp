#include "stepprof/analysis/least_squares.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <Eigen/Dense>

namespace stepprof {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

MatrixXd to_eigen(const MatrixView& a) {
  MatrixXd m(static_cast<Index>(a.rows), static_cast<Index>(a.cols));
  for (std::size_t r = 0; r < a.rows; ++r)
    for (std::size_t c = 0; c < a.cols; ++c) m(static_cast<Index>(r), static_cast<Index>(c)) = a.at(r, c);
  return m;
}

// Least squares on the columns `cols` (ascending) of `a`; the result is indexed like `cols`.
VectorXd solve_on(const MatrixXd& a, const VectorXd& b, const std::vector<Index>& cols) {
  if (static_cast<Index>(cols.size()) == a.cols()) return a.colPivHouseholderQr().solve(b);  // every column: no copy
  MatrixXd sub(a.rows(), static_cast<Index>(cols.size()));
  for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Index>(k)) = a.col(cols[k]);
  return sub.colPivHouseholderQr().solve(b);
}

// The tolerance of Lawson & Hanson's optimality test (a gradient entry above it lets its
// column in): from the rows of the problem, the largest column sum of |A| (A scaled to unit
// column norms) and the largest |b|.
double nnls_tolerance(double rows, Index cols, double max_abs_col_sum, double max_abs_b) {
  return 10.0 * std::numeric_limits<double>::epsilon() * std::max(rows, static_cast<double>(cols)) *
         std::max(1.0, max_abs_col_sum) * std::max(1.0, max_abs_b);
}

// Lawson & Hanson's NNLS on a matrix whose columns have unit norm (or are zero), with the
// optimality test's tolerance `tol` (nnls_tolerance).
VectorXd nnls_scaled(const MatrixXd& a, const VectorXd& b, double tol) {
  const Index n = a.cols();
  VectorXd x = VectorXd::Zero(n);
  if (n == 0 || a.rows() == 0) return x;
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  std::vector<bool> blocked(static_cast<std::size_t>(n), false);  // added and dropped at once: not again this round
  VectorXd w = a.transpose() * (b - a * x);
  for (int outer = 0; outer < 3 * static_cast<int>(n) + 10; ++outer) {
    Index t = -1;
    for (Index j = 0; j < n; ++j)
      if (!passive[static_cast<std::size_t>(j)] && !blocked[static_cast<std::size_t>(j)] && w(j) > tol &&
          (t < 0 || w(j) > w(t)))
        t = j;
    if (t < 0) break;
    passive[static_cast<std::size_t>(t)] = true;
    for (int inner = 0; inner < 3 * static_cast<int>(n) + 10; ++inner) {
      std::vector<Index> cols;
      for (Index j = 0; j < n; ++j)
        if (passive[static_cast<std::size_t>(j)]) cols.push_back(j);
      const VectorXd zs = solve_on(a, b, cols);
      VectorXd z = VectorXd::Zero(n);
      for (std::size_t k = 0; k < cols.size(); ++k) z(cols[k]) = zs(static_cast<Index>(k));
      bool feasible = true;
      for (const Index j : cols)
        if (z(j) <= 0) feasible = false;
      if (feasible) {
        x = z;
        break;
      }
      // Step from x towards z as far as stays feasible, then drop the zeroed columns.
      double alpha = 1.0;
      for (const Index j : cols)
        if (z(j) <= 0) {
          const double d = x(j) - z(j);
          alpha = std::min(alpha, d > 0 ? x(j) / d : 0.0);
        }
      x += alpha * (z - x);
      for (const Index j : cols)
        if (x(j) <= 1e-14 * std::max(1.0, x.cwiseAbs().maxCoeff())) {
          passive[static_cast<std::size_t>(j)] = false;
          x(j) = 0;
          if (j == t) blocked[static_cast<std::size_t>(j)] = true;
        }
    }
    w = a.transpose() * (b - a * x);
    for (Index j = 0; j < n; ++j)
      if (passive[static_cast<std::size_t>(j)]) blocked[static_cast<std::size_t>(j)] = false;
  }
  return x;
}

// NNLS with columns scaled to unit norm first (the coefficients are scaled back), so
// counters of very different sizes (token slots ~ 1e4, calls ~ 1) are treated alike.
VectorXd nnls_eigen(const MatrixXd& a, const VectorXd& b) {
  VectorXd norms = a.colwise().norm();
  MatrixXd scaled = a;
  for (Index j = 0; j < a.cols(); ++j)
    if (norms(j) > 0) scaled.col(j) /= norms(j);
  const double tol =
      a.size() ? nnls_tolerance(static_cast<double>(a.rows()), a.cols(), scaled.cwiseAbs().colwise().sum().maxCoeff(),
                                b.size() ? b.cwiseAbs().maxCoeff() : 0.0)
               : 0.0;
  VectorXd x = nnls_scaled(scaled, b, tol);
  for (Index j = 0; j < a.cols(); ++j) x(j) = norms(j) > 0 ? x(j) / norms(j) : 0.0;
  return x;
}

std::vector<double> to_vector(const VectorXd& v) { return {v.data(), v.data() + v.size()}; }

MatrixXd columns(const MatrixXd& a, const std::vector<std::size_t>& cols) {
  MatrixXd m(a.rows(), static_cast<Index>(cols.size()));
  for (std::size_t k = 0; k < cols.size(); ++k) m.col(static_cast<Index>(k)) = a.col(static_cast<Index>(cols[k]));
  return m;
}

// Leave-one-out errors of the NNLS fit of (a, b); `fit`, when given, is nnls_eigen(a, b)
// already computed (the PRESS shortcut starts from it).
VectorXd loo_errors(const MatrixXd& a, const VectorXd& b, const VectorXd* fit = nullptr) {
  const Index n = a.rows();
  VectorXd e(n);
  if (a.cols() == 0) return b;
  if (static_cast<std::size_t>(n) <= kExactLooRows) {
    MatrixXd train(n - 1, a.cols());
    VectorXd tb(n - 1);
    for (Index i = 0; i < n; ++i) {
      for (Index r = 0, k = 0; r < n; ++r) {
        if (r == i) continue;
        train.row(k) = a.row(r);
        tb(k++) = b(r);
      }
      e(i) = b(i) - a.row(i).dot(nnls_eigen(train, tb));
    }
    return e;
  }
  // PRESS on the active set of the full fit.
  const VectorXd x = fit ? *fit : nnls_eigen(a, b);
  std::vector<std::size_t> active;
  for (Index j = 0; j < a.cols(); ++j)
    if (x(j) > 0) active.push_back(static_cast<std::size_t>(j));
  const VectorXd r = b - a * x;
  if (active.empty()) return r;
  // (Every column active, the usual case: the QR of `a` itself, not of a copy.)
  const Eigen::ColPivHouseholderQR<MatrixXd> qr =
      static_cast<Index>(active.size()) == a.cols() ? a.colPivHouseholderQr() : columns(a, active).colPivHouseholderQr();
  const Index rank = qr.rank();
  // Thin Q (n x rank): the leverages are the squared norms of its rows.
  const MatrixXd q = qr.householderQ() * MatrixXd::Identity(n, rank);
  for (Index i = 0; i < n; ++i) {
    const double h = q.row(i).squaredNorm();
    e(i) = h < 1.0 - 1e-10 ? r(i) / (1.0 - h) : b(i);
  }
  return e;
}

double rms_of(const VectorXd& v) { return v.size() ? std::sqrt(v.squaredNorm() / static_cast<double>(v.size())) : 0.0; }

}  // namespace

std::vector<double> nnls(const MatrixView& a, std::span<const double> b) {
  if (a.cols == 0) return {};
  const VectorXd vb = Eigen::Map<const VectorXd>(b.data(), static_cast<Index>(b.size()));
  return to_vector(nnls_eigen(to_eigen(a), vb));
}

GroupedRows reduce_groups(const MatrixView& a, std::span<const double> b,
                          const std::vector<std::vector<std::size_t>>& groups) {
  GroupedRows g;
  g.cols = a.cols;
  const std::size_t w = a.cols + 1;
  g.first_row.push_back(0);
  for (const auto& rows : groups) {
    MatrixXd m(static_cast<Index>(rows.size()), static_cast<Index>(w));
    std::vector<double> sums(a.cols, 0.0);
    double max_b = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::size_t c = 0; c < a.cols; ++c) {
        const double v = a.at(rows[r], c);
        m(static_cast<Index>(r), static_cast<Index>(c)) = v;
        sums[c] += std::abs(v);
      }
      m(static_cast<Index>(r), static_cast<Index>(a.cols)) = b[rows[r]];
      max_b = std::max(max_b, std::abs(b[rows[r]]));
    }
    if (rows.size() > w) {
      const Eigen::HouseholderQR<MatrixXd> qr(m);
      m = qr.matrixQR().topRows(static_cast<Index>(w)).triangularView<Eigen::Upper>();
    }
    for (Index r = 0; r < m.rows(); ++r)
      for (Index c = 0; c < m.cols(); ++c) g.rows.push_back(m(r, c));
    g.first_row.push_back(g.first_row.back() + static_cast<std::size_t>(m.rows()));
    g.rows_before.push_back(rows.size());
    g.abs_sums.insert(g.abs_sums.end(), sums.begin(), sums.end());
    g.max_abs_b.push_back(max_b);
  }
  return g;
}

std::vector<double> nnls_groups(const GroupedRows& g, std::span<const std::size_t> picks) {
  if (g.cols == 0) return {};
  const std::size_t w = g.cols + 1;
  std::size_t reduced = 0;
  double rows = 0, max_b = 0;
  std::vector<double> sums(g.cols, 0.0);
  for (const std::size_t p : picks) {
    if (p >= g.rows_before.size()) throw std::out_of_range("nnls_groups: no such group");
    reduced += g.first_row[p + 1] - g.first_row[p];
    rows += static_cast<double>(g.rows_before[p]);
    max_b = std::max(max_b, g.max_abs_b[p]);
    for (std::size_t c = 0; c < g.cols; ++c) sums[c] += g.abs_sums[p * g.cols + c];
  }
  MatrixXd a(static_cast<Index>(reduced), static_cast<Index>(g.cols));
  VectorXd b(static_cast<Index>(reduced));
  Index at = 0;
  for (const std::size_t p : picks)
    for (std::size_t r = g.first_row[p]; r < g.first_row[p + 1]; ++r, ++at) {
      const double* row = g.rows.data() + r * w;
      for (std::size_t c = 0; c < g.cols; ++c) a(at, static_cast<Index>(c)) = row[c];
      b(at) = row[g.cols];
    }
  // As nnls_eigen, with the tolerance of the original rows: the reduced rows have the
  // same column norms, but not the same count, |A| sums or |b|.
  const VectorXd norms = a.colwise().norm();
  double max_sum = 0;
  for (Index j = 0; j < a.cols(); ++j)
    if (norms(j) > 0) {
      a.col(j) /= norms(j);
      max_sum = std::max(max_sum, sums[static_cast<std::size_t>(j)] / norms(j));
    }
  VectorXd x = nnls_scaled(a, b, nnls_tolerance(rows, a.cols(), max_sum, max_b));
  for (Index j = 0; j < a.cols(); ++j) x(j) = norms(j) > 0 ? x(j) / norms(j) : 0.0;
  return to_vector(x);
}

std::vector<double> nnls_loo_errors(const MatrixView& a, std::span<const double> b) {
  const VectorXd vb = Eigen::Map<const VectorXd>(b.data(), static_cast<Index>(b.size()));
  if (a.rows < 2) return std::vector<double>(b.begin(), b.end());
  return to_vector(loo_errors(to_eigen(a), vb));
}

double rms(std::span<const double> v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

Selection select_columns(const MatrixView& a, std::span<const double> b, const SelectionOptions& opt) {
  Selection out;
  const MatrixXd m = to_eigen(a);
  const VectorXd vb = Eigen::Map<const VectorXd>(b.data(), static_cast<Index>(b.size()));
  std::vector<std::size_t> chosen;
  for (std::size_t c : opt.forced)
    if (c < a.cols && std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
  double current = chosen.empty() ? std::numeric_limits<double>::infinity() : rms_of(loo_errors(columns(m, chosen), vb));
  for (std::size_t c : chosen) out.steps.push_back({c, current});

  while (chosen.size() < opt.max_columns) {
    std::optional<std::size_t> best;
    double best_err = 0;
    for (std::size_t c = 0; c < a.cols; ++c) {
      if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) continue;
      if (m.col(static_cast<Index>(c)).cwiseAbs().maxCoeff() == 0) continue;  // a column of zeros explains nothing
      auto trial = chosen;
      trial.push_back(c);
      const MatrixXd sub = columns(m, trial);
      const VectorXd fit = nnls_eigen(sub, vb);
      if (fit(static_cast<Index>(trial.size() - 1)) <= 0) continue;  // would get no weight
      const double err = rms_of(loo_errors(sub, vb, &fit));
      if (!best || err < best_err) {
        best = c;
        best_err = err;
      }
    }
    if (!best) break;
    const bool first = chosen.empty();
    if (first && opt.baseline && *opt.baseline < a.cols && *best != *opt.baseline) {
      const std::vector<std::size_t> base{*opt.baseline};
      const MatrixXd sub = columns(m, base);
      const VectorXd fit = nnls_eigen(sub, vb);
      if (fit(0) > 0) {
        const double base_err = rms_of(loo_errors(sub, vb, &fit));
        if (!(best_err < (1.0 - opt.min_gain) * base_err)) {
          best = *opt.baseline;
          best_err = base_err;
        }
      }
    }
    if (!first && !(best_err < (1.0 - opt.min_gain) * current)) break;
    chosen.push_back(*best);
    current = best_err;
    out.steps.push_back({*best, best_err});
  }

  // Final fit; columns that end with a zero coefficient are dropped (forced ones too:
  // a zero weight is no term).
  MatrixXd fm;
  VectorXd x;
  for (;;) {
    fm = columns(m, chosen);
    x = nnls_eigen(fm, vb);
    std::vector<std::size_t> kept;
    std::vector<double> coef;
    for (std::size_t k = 0; k < chosen.size(); ++k)
      if (x(static_cast<Index>(k)) > 0) {
        kept.push_back(chosen[k]);
        coef.push_back(x(static_cast<Index>(k)));
      }
    if (kept.size() == chosen.size()) {
      out.columns = std::move(kept);
      out.coef = std::move(coef);
      break;
    }
    chosen = std::move(kept);
  }
  out.heldout_rmse = rms_of(loo_errors(fm, vb, &x));  // fm, x: the last fit, on out.columns
  VectorXd fitted = VectorXd::Zero(vb.size());
  for (std::size_t k = 0; k < out.columns.size(); ++k) fitted += out.coef[k] * fm.col(static_cast<Index>(k));
  const double mean = vb.size() ? vb.mean() : 0.0;
  const double tss = (vb.array() - mean).square().sum();
  if (tss > 1e-12 * std::max(1.0, vb.squaredNorm())) out.r2 = 1.0 - (vb - fitted).squaredNorm() / tss;
  return out;
}

}  // namespace stepprof
