#include "analysis/nnls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace grademl::analysis {
namespace {

// A (rows x cols, row-major) as nested rows for readability.
std::vector<double> Flat(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

NnlsResult Solve(const std::vector<std::vector<double>>& a, const std::vector<double>& b) {
  auto flat = Flat(a);
  auto r = SolveNnls(flat, a.size(), a.empty() ? 0 : a[0].size(), b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : NnlsResult{};
}

TEST(NnlsTest, RecoversAnExactPositiveSolution) {
  // b = A [1, 2]
  NnlsResult r = Solve({{1, 0}, {0, 1}, {1, 1}, {2, 1}}, {1, 2, 3, 4});
  ASSERT_EQ(r.x.size(), 2u);
  EXPECT_NEAR(r.x[0], 1, 1e-12);
  EXPECT_NEAR(r.x[1], 2, 1e-12);
  EXPECT_NEAR(r.residual_sq, 0, 1e-20);
  EXPECT_TRUE(r.converged);
  EXPECT_FALSE(r.dependent[0]);
  EXPECT_FALSE(r.dependent[1]);
}

TEST(NnlsTest, ClampsANegativeUnconstrainedComponentToZero) {
  // Unconstrained least squares gives x = [2, -1]; with x >= 0 the answer is [1.5, 0]:
  // min (x-2)^2 + 1 + (x-1)^2, residual 0.25 + 1 + 0.25.
  NnlsResult r = Solve({{1, 0}, {0, 1}, {1, 1}}, {2, -1, 1});
  EXPECT_NEAR(r.x[0], 1.5, 1e-12);
  EXPECT_EQ(r.x[1], 0);
  EXPECT_NEAR(r.residual_sq, 1.5, 1e-12);
}

TEST(NnlsTest, IdenticalColumnsGiveTheWeightToTheFirst) {
  // Columns 0 and 1 are the same; b = 2 col0 + 1 col2.
  NnlsResult r = Solve({{1, 1, 1}, {2, 2, 0}, {3, 3, 0}}, {3, 4, 6});
  EXPECT_NEAR(r.x[0], 2, 1e-12);
  EXPECT_EQ(r.x[1], 0);
  EXPECT_NEAR(r.x[2], 1, 1e-12);
  EXPECT_TRUE(r.dependent[1]);
  EXPECT_FALSE(r.dependent[0]);
  EXPECT_FALSE(r.dependent[2]);
  EXPECT_NEAR(r.residual_sq, 0, 1e-18);
}

TEST(NnlsTest, NearlyCollinearColumnsStayDeterministicAndBounded) {
  // Column 1 differs from column 0 by 1e-9: it is not taken in, so no huge opposite
  // coefficients appear.
  NnlsResult r = Solve({{1, 1 + 1e-9}, {2, 2}, {3, 3 - 1e-9}}, {1, 2, 3.5});
  EXPECT_TRUE(r.dependent[0] || r.dependent[1]);
  EXPECT_TRUE(r.x[0] == 0 || r.x[1] == 0);
  EXPECT_LT(r.x[0] + r.x[1], 1.2);
  NnlsResult again = Solve({{1, 1 + 1e-9}, {2, 2}, {3, 3 - 1e-9}}, {1, 2, 3.5});
  EXPECT_EQ(r.x, again.x);
}

TEST(NnlsTest, ScaledCollinearColumnsFitExactlyWithOneOfThem) {
  NnlsResult r = Solve({{1, 2}, {2, 4}, {3, 6}}, {2, 4, 6});
  EXPECT_NEAR(r.residual_sq, 0, 1e-18);
  EXPECT_NEAR(r.x[0] + 2 * r.x[1], 2, 1e-12);
  EXPECT_TRUE(r.x[0] == 0 || r.x[1] == 0);
}

TEST(NnlsTest, ZeroColumnsStayAtZero) {
  NnlsResult r = Solve({{0, 1, 0}, {0, 2, 0}, {0, 0, 0}}, {3, 6, 1});
  EXPECT_EQ(r.x[0], 0);
  EXPECT_NEAR(r.x[1], 3, 1e-12);
  EXPECT_EQ(r.x[2], 0);
  EXPECT_TRUE(r.dependent[0]);
  EXPECT_TRUE(r.dependent[2]);
  EXPECT_NEAR(r.residual_sq, 1, 1e-12);
}

TEST(NnlsTest, AllNegativeTargetGivesZero) {
  NnlsResult r = Solve({{1, 0}, {0, 1}}, {-1, -2});
  EXPECT_EQ(r.x, (std::vector<double>{0, 0}));
  EXPECT_NEAR(r.residual_sq, 5, 1e-12);
}

TEST(NnlsTest, ZeroTargetAndEmptyProblem) {
  NnlsResult r = Solve({{1, 2}, {3, 4}}, {0, 0});
  EXPECT_EQ(r.x, (std::vector<double>{0, 0}));
  auto empty = SolveNnls(std::vector<double>{}, 0, 0, std::vector<double>{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->x.empty());
}

TEST(NnlsTest, RejectsBadInput) {
  std::vector<double> a{1, 2, 3};
  std::vector<double> b{1, 2};
  EXPECT_FALSE(SolveNnls(a, 2, 2, b).ok());
  std::vector<double> a2{1, NAN, 3, 4};
  auto r = SolveNnls(a2, 2, 2, b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(NnlsTest, WeightedSparseRowsMatchTheDenseProblem) {
  // Row weights w are the same as scaling the row by sqrt(w).
  NormalEquations eq(3);
  std::vector<std::vector<double>> dense;
  std::vector<double> b;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < 40; ++k) {
    double w = 0.5 + u(rng);
    std::vector<std::pair<size_t, double>> row;
    std::vector<double> drow(3, 0.0);
    for (size_t j = 0; j < 3; ++j) {
      if (u(rng) < 0.6) {
        double v = u(rng);
        row.emplace_back(j, v);
        drow[j] = v * std::sqrt(w);
      }
    }
    double target = 0.3 * (row.empty() ? 0 : row[0].second) + u(rng) * 0.1;
    eq.AddRow(row, target, w);
    dense.push_back(drow);
    b.push_back(target * std::sqrt(w));
  }
  auto sparse = SolveNnls(eq);
  ASSERT_TRUE(sparse.ok());
  NnlsResult d = Solve(dense, b);
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(sparse->x[j], d.x[j], 1e-9);
  EXPECT_NEAR(sparse->residual_sq, d.residual_sq, 1e-9);
  EXPECT_EQ(eq.rows(), 40u);
}

TEST(NnlsTest, SatisfiesTheOptimalityConditionsOnRandomProblems) {
  std::mt19937 rng(42);
  std::normal_distribution<double> g(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    size_t rows = 30, cols = 1 + trial % 12;
    std::vector<double> a(rows * cols), b(rows);
    for (double& v : a) v = g(rng);
    for (double& v : b) v = g(rng);
    auto r = SolveNnls(a, rows, cols, b);
    ASSERT_TRUE(r.ok());
    // KKT: x >= 0; gradient A^T (b - A x) <= 0 where x = 0 and = 0 where x > 0.
    std::vector<double> resid(b);
    for (size_t k = 0; k < rows; ++k)
      for (size_t j = 0; j < cols; ++j) resid[k] -= a[k * cols + j] * r->x[j];
    for (size_t j = 0; j < cols; ++j) {
      double w = 0;
      for (size_t k = 0; k < rows; ++k) w += a[k * cols + j] * resid[k];
      EXPECT_GE(r->x[j], 0);
      if (r->x[j] > 0) {
        EXPECT_NEAR(w, 0, 1e-8) << "trial " << trial << " col " << j;
      } else {
        EXPECT_LE(w, 1e-8) << "trial " << trial << " col " << j;
      }
    }
    EXPECT_TRUE(r->converged);
  }
}

TEST(NnlsTest, ManyColumnsSolveExactly) {
  // 200 columns, 1000 rows, a known sparse non-negative solution.
  size_t rows = 1000, cols = 200;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> a(rows * cols), truth(cols, 0.0), b(rows, 0.0);
  for (double& v : a) v = u(rng) < 0.05 ? u(rng) : 0.0;
  for (size_t j = 0; j < cols; j += 3) truth[j] = 1 + u(rng);
  for (size_t k = 0; k < rows; ++k)
    for (size_t j = 0; j < cols; ++j) b[k] += a[k * cols + j] * truth[j];
  auto r = SolveNnls(a, rows, cols, b);
  ASSERT_TRUE(r.ok());
  for (size_t j = 0; j < cols; ++j) EXPECT_NEAR(r->x[j], truth[j], 1e-7) << j;
  EXPECT_NEAR(r->residual_sq, 0, 1e-12);
}

}  // namespace
}  // namespace grademl::analysis
