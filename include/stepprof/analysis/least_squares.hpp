// The numerical core of the cost models (cost_model.hpp): non-negative least squares,
// its leave-one-out errors, and forward feature selection by those errors. Matrices are
// row-major spans (rows = updates, columns = features); Eigen does the linear algebra.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace stepprof {

/// A dense row-major matrix view: `rows` x `cols` values, row after row.
struct MatrixView {
  std::span<const double> values;
  std::size_t rows = 0, cols = 0;
  [[nodiscard]] double at(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
};

/// Non-negative least squares: the x >= 0 that minimizes ||A x - b||_2, by the
/// active-set algorithm of Lawson & Hanson, "Solving Least Squares Problems" (1974),
/// chapter 23 (the algorithm behind MATLAB's lsqnonneg and SciPy's nnls). The
/// unconstrained subproblems are solved by Eigen's column-pivoting Householder QR, so
/// collinear columns (e.g. calls that equal micro-batches in every update) get one
/// non-zero coefficient, not an error. Returns A.cols coefficients; {} when A has no
/// columns. `b` must have A.rows entries.
std::vector<double> nnls(const MatrixView& a, std::span<const double> b);

/// The rows of a least-squares problem (A | b) in groups, each group reduced once so that
/// NNLS over any multiset of whole groups (a bootstrap resample of steps) costs a few rows
/// per group instead of every row: a group of m > A.cols + 1 rows is replaced by the
/// (A.cols + 1) x (A.cols + 1) R factor of the Householder QR of its m x (A.cols + 1)
/// matrix (A_g | b_g). Q is orthogonal, so ||A_g x - b_g||^2 = ||R_g (x, -1)||^2 for every
/// x, and the stacked R factors have the same least-squares solutions and column norms as
/// the stacked rows (Golub & Van Loan, "Matrix Computations", 4th ed., section 5.3.3).
/// Smaller groups are kept as they are. Build with reduce_groups.
struct GroupedRows {
  std::size_t cols = 0;                ///< columns of A
  std::vector<double> rows;            ///< reduced rows, row-major, cols + 1 values each: A's, then b's
  std::vector<std::size_t> first_row;  ///< group g's reduced rows are [first_row[g], first_row[g + 1])
  std::vector<std::size_t> rows_before;  ///< group g's rows before reduction
  std::vector<double> abs_sums;        ///< group g's sum of |A[r][j]| over its rows: [g * cols + j]
  std::vector<double> max_abs_b;       ///< group g's largest |b[r]|
};

/// Reduces the groups of rows of (a | b): groups[g] lists row indices of `a` (each < a.rows;
/// a row may be in several groups or none). `b` must have a.rows entries.
GroupedRows reduce_groups(const MatrixView& a, std::span<const double> b,
                          const std::vector<std::vector<std::size_t>>& groups);

/// NNLS over the groups `picks` (indices into g's groups; a group picked twice counts
/// twice): the solution of nnls() on the stacked original rows of those groups, to
/// rounding, including the tolerance of Lawson & Hanson's optimality test, which is
/// computed from the original rows (their count, column sums of |A| and largest |b|).
/// Returns g.cols coefficients; {} when g.cols is 0. Throws std::out_of_range for a pick
/// past the last group.
std::vector<double> nnls_groups(const GroupedRows& g, std::span<const std::size_t> picks);

/// Leave-one-out prediction errors of the NNLS fit: entry i is b[i] minus the prediction
/// for row i of the model fitted without row i. Exact refits when rows <= kExactLooRows;
/// beyond that, the PRESS shortcut e_i / (1 - h_ii) on the columns the full fit keeps
/// (exact when leaving a row out does not change which coefficients are zero). Rows with
/// leverage h_ii = 1 (the only row that informs a coefficient) count their whole value as
/// the error. Needs rows >= 2.
std::vector<double> nnls_loo_errors(const MatrixView& a, std::span<const double> b);

/// Above this many rows, nnls_loo_errors uses the PRESS shortcut instead of refits.
inline constexpr std::size_t kExactLooRows = 256;

/// Root mean square of `v` (0 for an empty span).
double rms(std::span<const double> v);

/// One step of a forward selection: the candidate added and the held-out error after it.
struct SelectionStep {
  std::size_t column = 0;    ///< index into the candidate columns
  double heldout_rmse = 0;   ///< leave-one-out RMSE of the model with it [units of b]
};

/// The result of select_columns.
struct Selection {
  std::vector<std::size_t> columns;  ///< chosen candidate columns, in the order added, each with coef > 0
  std::vector<double> coef;          ///< their NNLS coefficients (same order) [units of b per unit of the column]
  double heldout_rmse = 0;           ///< leave-one-out RMSE of the final model [units of b]
  std::optional<double> r2;          ///< 1 - RSS / TSS of the final fit on all rows; absent when b is constant
  std::vector<SelectionStep> steps;  ///< the selection path
};

struct SelectionOptions {
  /// A candidate is kept only if it lowers the held-out RMSE by at least this fraction
  /// of the current held-out RMSE (the first candidate is always kept).
  double min_gain = 0.05;
  std::size_t max_columns = 4;  ///< at most this many columns in a model
  /// Columns added before any selection (e.g. a work measure a model must contain); they
  /// are kept whatever the held-out error says.
  std::vector<std::size_t> forced;
  /// The model to beat when nothing is forced: in the first round another column is
  /// chosen over `baseline` only if it lowers the baseline's held-out RMSE by min_gain.
  std::optional<std::size_t> baseline;
};

/// Forward selection by leave-one-out error (docs/whatif.md "Choosing the features"):
/// start from the forced columns; in each round fit NNLS with every remaining candidate
/// added, take the one with the lowest held-out RMSE (ties: the lower column index), and
/// keep it if it lowers the held-out RMSE by at least min_gain (the first column: if it
/// lowers the baseline's by min_gain, else the baseline is kept; without a baseline the
/// first column is always kept); stop when none does or max_columns are chosen. Columns whose final coefficient is 0
/// are dropped and the rest refitted. Needs a.rows >= 3.
Selection select_columns(const MatrixView& a, std::span<const double> b, const SelectionOptions& options = {});

}  // namespace stepprof
