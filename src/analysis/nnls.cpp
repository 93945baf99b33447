#include "analysis/nnls.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grademl::analysis {

NormalEquations::NormalEquations(size_t columns) : n_(columns), gram_(columns * columns, 0.0), atb_(columns, 0.0) {}

void NormalEquations::AddLhs(std::span<const std::pair<size_t, double>> entries, double w) {
  for (size_t a = 0; a < entries.size(); ++a) {
    auto [i, vi] = entries[a];
    double wvi = w * vi;
    for (size_t b = a; b < entries.size(); ++b) {
      auto [j, vj] = entries[b];
      size_t lo = std::min(i, j), hi = std::max(i, j);
      gram_[lo * n_ + hi] += wvi * vj;
    }
  }
}

void NormalEquations::AddRhs(std::span<const std::pair<size_t, double>> entries, double b, double w) {
  for (auto [i, vi] : entries) atb_[i] += w * vi * b;
  btb_ += w * b * b;
}

void NormalEquations::AddRow(std::span<const std::pair<size_t, double>> entries, double b, double w) {
  AddLhs(entries, w);
  AddRhs(entries, b, w);
  ++rows_;
}

NormalEquations NormalEquations::WithRhs(std::vector<double> atb, double btb) const {
  NormalEquations out = *this;
  out.atb_ = std::move(atb);
  out.atb_.resize(n_, 0.0);
  out.btb_ = btb;
  return out;
}

namespace {

// Lawson-Hanson on the normal equations G x = c (G = A^T A symmetric, c = A^T b), with a
// Cholesky factor of G restricted to the passive set, grown one column at a time.
class Solver {
 public:
  Solver(std::vector<double> g, std::vector<double> c, double btb, size_t n, const NnlsOptions& options)
      : n_(n), g_(std::move(g)), c_(std::move(c)), btb_(btb), options_(options), l_(n * n, 0.0) {}

  NnlsResult Run() {
    NnlsResult r;
    r.x.assign(n_, 0.0);
    r.dependent.assign(n_, false);
    in_passive_.assign(n_, false);
    x_.assign(n_, 0.0);
    double gmax = 0;
    for (size_t j = 0; j < n_; ++j) gmax = std::max(gmax, G(j, j));
    double cmax = 0;
    for (size_t j = 0; j < n_; ++j) cmax = std::max(cmax, std::fabs(c_[j]));
    // |w_j| = |a_j . r| <= ||a_j|| ||r||: the gradient is compared with the scale of the problem.
    double scale = std::sqrt(gmax * std::max(btb_, 0.0));
    double tol = 1e-11 * std::max(scale, cmax);
    std::vector<bool> excluded(n_, false);  // zero or collinear columns never join
    for (size_t j = 0; j < n_; ++j) {
      if (G(j, j) <= 0) excluded[j] = true;
    }

    long max_adds = static_cast<long>(n_) * std::max(1, options_.max_iterations_per_column) + 1;
    std::vector<double> w(n_);
    while (true) {
      Gradient(w);
      size_t best = n_;
      for (size_t j = 0; j < n_; ++j) {
        if (in_passive_[j] || excluded[j] || !(w[j] > tol)) continue;
        if (best == n_ || w[j] > w[best]) best = j;
      }
      if (best == n_) break;
      if (r.iterations >= max_adds) {
        r.converged = false;
        break;
      }
      ++r.iterations;
      if (!Append(best)) {
        excluded[best] = true;
        r.dependent[best] = true;
        continue;
      }
      if (!InnerLoop(best)) {
        // The new column could not take a positive coefficient although its gradient was
        // positive: numerically dependent on the passive ones.
        excluded[best] = true;
        r.dependent[best] = true;
      }
    }

    // Columns outside the solution that the passive columns already span are flagged too
    // (e.g. the second of two identical columns never had a positive gradient).
    for (size_t j = 0; j < n_; ++j) {
      if (in_passive_[j] || r.dependent[j]) continue;
      if (G(j, j) <= 0 || PivotSq(j) <= options_.collinear_tolerance * G(j, j)) r.dependent[j] = true;
    }
    for (size_t j = 0; j < n_; ++j) r.x[j] = in_passive_[j] ? std::max(0.0, x_[j]) : 0.0;
    // ||Ax - b||^2 = b.b - 2 x.c + x.G.x
    double xc = 0, xgx = 0;
    for (size_t i : passive_) {
      xc += r.x[i] * c_[i];
      for (size_t j : passive_) xgx += r.x[i] * G(i, j) * r.x[j];
    }
    r.residual_sq = std::max(0.0, btb_ - 2 * xc + xgx);
    return r;
  }

 private:
  double G(size_t i, size_t j) const { return g_[i * n_ + j]; }
  double& L(size_t i, size_t j) { return l_[i * n_ + j]; }

  void Gradient(std::vector<double>& w) const {
    for (size_t j = 0; j < n_; ++j) {
      double gx = 0;
      for (size_t i : passive_) gx += G(j, i) * x_[i];
      w[j] = c_[j] - gx;
    }
  }

  // The squared pivot column j would get if appended to the current factor; fills col_.
  double PivotSq(size_t j) {
    size_t k = passive_.size();
    col_.assign(k, 0.0);
    double sum = 0;
    for (size_t i = 0; i < k; ++i) {
      double v = G(passive_[i], j);
      for (size_t m = 0; m < i; ++m) v -= L(i, m) * col_[m];
      col_[i] = v / L(i, i);
      sum += col_[i] * col_[i];
    }
    return G(j, j) - sum;
  }

  bool Append(size_t j) {
    double d2 = PivotSq(j);
    if (!(d2 > options_.collinear_tolerance * G(j, j)) || !(d2 > 0)) return false;
    size_t k = passive_.size();
    for (size_t i = 0; i < k; ++i) L(k, i) = col_[i];
    L(k, k) = std::sqrt(d2);
    passive_.push_back(j);
    in_passive_[j] = true;
    return true;
  }

  // Rebuilds the factor for the current passive order; columns that became dependent are
  // dropped (their x set to 0).
  void Rebuild() {
    std::vector<size_t> order = passive_;
    passive_.clear();
    for (size_t j : order) {
      in_passive_[j] = false;
      if (!Append(j)) x_[j] = 0;
    }
  }

  // z = (G_PP)^-1 c_P by the factor.
  std::vector<double> SolvePassive() {
    size_t k = passive_.size();
    std::vector<double> y(k);
    for (size_t i = 0; i < k; ++i) {
      double v = c_[passive_[i]];
      for (size_t m = 0; m < i; ++m) v -= L(i, m) * y[m];
      y[i] = v / L(i, i);
    }
    for (size_t ii = k; ii-- > 0;) {
      double v = y[ii];
      for (size_t m = ii + 1; m < k; ++m) v -= L(m, ii) * y[m];
      y[ii] = v / L(ii, ii);
    }
    return y;
  }

  void Remove(size_t j) {
    in_passive_[j] = false;
    x_[j] = 0;
    passive_.erase(std::find(passive_.begin(), passive_.end(), j));
  }

  // Lawson-Hanson's inner loop after `added` joined. False when `added` itself cannot be
  // positive at once (it is then removed again).
  bool InnerLoop(size_t added) {
    for (size_t guard = 0; guard <= n_ + 1; ++guard) {
      std::vector<double> z = SolvePassive();
      bool all_positive = true;
      for (double v : z) all_positive = all_positive && v > 0;
      if (all_positive) {
        for (size_t i = 0; i < passive_.size(); ++i) x_[passive_[i]] = z[i];
        return true;
      }
      if (guard == 0 && z.back() <= 0) {  // `added` is the last passive column
        Remove(added);
        return false;
      }
      // Step from x towards z until the first coefficient reaches 0.
      double alpha = 1;
      for (size_t i = 0; i < passive_.size(); ++i) {
        if (z[i] > 0) continue;
        double xi = x_[passive_[i]];
        double a = xi / (xi - z[i]);
        alpha = std::min(alpha, a);
      }
      std::vector<size_t> drop;
      for (size_t i = 0; i < passive_.size(); ++i) {
        size_t j = passive_[i];
        double xi = x_[j];
        x_[j] = xi + alpha * (z[i] - xi);
        bool blocking = z[i] <= 0 && xi / (xi - z[i]) <= alpha;
        if (blocking || x_[j] <= 0) drop.push_back(j);
      }
      for (size_t j : drop) Remove(j);
      Rebuild();
      if (passive_.empty()) return true;
    }
    return true;
  }

  size_t n_;
  std::vector<double> g_;
  std::vector<double> c_;
  double btb_;
  NnlsOptions options_;
  std::vector<double> l_;
  std::vector<double> x_;
  std::vector<double> col_;
  std::vector<size_t> passive_;
  std::vector<bool> in_passive_;
};

bool AllFinite(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

StatusOr<NnlsResult> SolveNnls(const NormalEquations& eq, const NnlsOptions& options) {
  size_t n = eq.columns();
  const auto& upper = eq.gram_upper();
  if (!AllFinite(upper) || !AllFinite(eq.atb()) || !std::isfinite(eq.btb())) {
    return InvalidArgument("nnls: the normal equations hold a value that is not finite");
  }
  std::vector<double> g(n * n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) g[i * n + j] = g[j * n + i] = upper[i * n + j];
  }
  Solver solver(std::move(g), eq.atb(), eq.btb(), n, options);
  return solver.Run();
}

StatusOr<NnlsResult> SolveNnls(std::span<const double> a, size_t rows, size_t cols, std::span<const double> b,
                               const NnlsOptions& options) {
  if (a.size() != rows * cols || b.size() != rows) {
    return InvalidArgument("nnls: A has {} values and b {}, expected {} x {} and {}", a.size(), b.size(), rows, cols,
                           rows);
  }
  if (!AllFinite(a) || !AllFinite(b)) return InvalidArgument("nnls: A or b holds a value that is not finite");
  NormalEquations eq(cols);
  std::vector<std::pair<size_t, double>> entries;
  for (size_t k = 0; k < rows; ++k) {
    entries.clear();
    for (size_t j = 0; j < cols; ++j) {
      if (a[k * cols + j] != 0) entries.emplace_back(j, a[k * cols + j]);
    }
    eq.AddRow(entries, b[k]);
  }
  GRADEML_ASSIGN_OR_RETURN(NnlsResult result, SolveNnls(eq, options));
  double r2 = 0;
  for (size_t k = 0; k < rows; ++k) {
    double v = -b[k];
    for (size_t j = 0; j < cols; ++j) v += a[k * cols + j] * result.x[j];
    r2 += v * v;
  }
  result.residual_sq = r2;
  return result;
}

}  // namespace grademl::analysis
