// Non-negative least squares: min ||A x - b||^2 subject to x >= 0, by Lawson and Hanson's
// active-set method.
//
// Made for few columns (up to a few hundred) and many rows: the solver works on the normal
// equations (A^T A, A^T b, b^T b), which NormalEquations accumulates row by row from sparse
// rows without ever holding A. SolveNnls is the dense front end for small problems.
//
// Columns that are (nearly) linear combinations of the columns already in the solution are
// not taken in: their coefficient stays 0 and they are flagged `dependent`. The outcome is
// deterministic: ties go to the lower column index, so of two identical columns the first
// gets the weight.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"

namespace grademl::analysis {

struct NnlsOptions {
  // A column joins the solution only when its pivot in the Cholesky factor, squared, is at
  // least this fraction of its own squared norm; below it counts as collinear.
  double collinear_tolerance = 1e-10;
  // The outer loop stops after this many column additions per column (a safeguard; the
  // method terminates in exact arithmetic).
  int max_iterations_per_column = 3;
};

// The answer of one NNLS solve.
struct NnlsResult {
  std::vector<double> x;        // the coefficients, all >= 0
  double residual_sq = 0;       // ||A x - b||^2
  std::vector<bool> dependent;  // columns left at 0 because they were collinear with the solution's
  int iterations = 0;           // columns added to the solution, in all
  bool converged = true;        // false when max_iterations stopped the loop (x is still feasible)
};

// The normal equations of a weighted least-squares problem, accumulated one (sparse) row at a
// time: min sum_k w_k (sum_j A_kj x_j - b_k)^2. Holds n x n + n + 1 numbers.
class NormalEquations {
 public:
  explicit NormalEquations(size_t columns = 0);

  size_t columns() const { return n_; }
  size_t rows() const { return rows_; }

  // Adds the row sum_j entries[j].second x_{entries[j].first} = b with weight w (w >= 0).
  // Column indexes must be distinct within one row.
  void AddRow(std::span<const std::pair<size_t, double>> entries, double b, double w = 1);
  // Adds only the left-hand side of a row (its A^T A part); with AddRhs for several right-hand
  // sides that share the same rows, the costly part is paid once.
  void AddLhs(std::span<const std::pair<size_t, double>> entries, double w = 1);
  void AddRhs(std::span<const std::pair<size_t, double>> entries, double b, double w = 1);
  void CountRow() { ++rows_; }

  // A^T W A, row-major n x n; only its upper triangle (j >= i) is filled.
  const std::vector<double>& gram_upper() const { return gram_; }
  const std::vector<double>& atb() const { return atb_; }  // A^T W b
  double btb() const { return btb_; }                      // b^T W b

  // The same left-hand side with another right-hand side (for several metrics on one grid).
  NormalEquations WithRhs(std::vector<double> atb, double btb) const;

 private:
  size_t n_ = 0;
  size_t rows_ = 0;
  std::vector<double> gram_;
  std::vector<double> atb_;
  double btb_ = 0;
};

// Solves from the normal equations. InvalidArgument for non-finite input.
StatusOr<NnlsResult> SolveNnls(const NormalEquations& eq, const NnlsOptions& options = {});

// Solves for a dense A (rows x cols, row-major) and b (rows). The residual is computed from A
// directly. InvalidArgument when the sizes disagree or a value is not finite.
StatusOr<NnlsResult> SolveNnls(std::span<const double> a, size_t rows, size_t cols, std::span<const double> b,
                               const NnlsOptions& options = {});

}  // namespace grademl::analysis
