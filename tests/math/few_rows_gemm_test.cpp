#include "math/few_rows_gemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "math/blas_setup.hpp"
#include "math/cpu_isa.hpp"
#include "math/sgd_step.hpp"
#include "support/kernel_data.hpp"

namespace crema::cpu {
namespace {

std::vector<float> Multiply(int m, int n, int k, const std::vector<float>& x,
                            const std::vector<float>& w) {
  std::vector<float> y(static_cast<size_t>(m) * n, std::nanf(""));
  GemmFewRows(m, n, k, x.data(), w.data(), y.data());
  return y;
}

// Every output against a double-precision sum, within float rounding of a k-term dot product.
void ExpectProduct(int m, int n, int k, const std::vector<float>& x, const std::vector<float>& w,
                   const std::vector<float>& y) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, magnitude = 0;
      for (int t = 0; t < k; ++t) {
        const double p =
            double{x[static_cast<size_t>(i) * k + t]} * w[static_cast<size_t>(j) * k + t];
        sum += p;
        magnitude += std::fabs(p);
      }
      // The bound of a k-term float sum: k units of rounding (2^-24) of the magnitudes' sum.
      ASSERT_NEAR(y[static_cast<size_t>(i) * n + j], sum, (k + 1) * 6e-8 * magnitude + 1e-30)
          << "m " << m << " n " << n << " k " << k << " at " << i << "," << j;
    }
  }
}

const CpuIsa kLevels[] = {CpuIsa::kBaseline, CpuIsa::kAvx2Fma, CpuIsa::kAvx512};

TEST(FewRowsGemm, EveryShapeOnEveryLevelIsTheProduct) {
  // Rows below, at and above the tile height and the limit; k with and without a tail beyond the
  // vector width; n with and without a remainder of w's tile and of the threads' blocks.
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    for (int m : {1, 2, 3, 4, 5, 7, 16, 17, kFewRowsGemmMaxRows, kFewRowsGemmMaxRows + 1}) {
      for (int k : {1, 7, 16, 37, 300}) {
        for (int n : {1, 3, 17, 50}) {
          const std::vector<float> x =
              testing::RandomFloats(static_cast<size_t>(m) * k, m * 31 + k);
          const std::vector<float> w =
              testing::RandomFloats(static_cast<size_t>(n) * k, n * 17 + k);
          ExpectProduct(m, n, k, x, w, Multiply(m, n, k, x, w));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(FewRowsGemm, AppliesOnlyToFewRowsOnVectorLevels) {
  EXPECT_FALSE(FewRowsGemmApplies(0));
  EXPECT_FALSE(FewRowsGemmApplies(kFewRowsGemmMaxRows + 1));
  {
    ScopedCpuIsaLimit limit(CpuIsa::kBaseline);
    EXPECT_FALSE(FewRowsGemmApplies(16));
  }
  EXPECT_EQ(FewRowsGemmApplies(1), CpuIsaLevel() != CpuIsa::kBaseline);
  EXPECT_EQ(FewRowsGemmApplies(kFewRowsGemmMaxRows), CpuIsaLevel() != CpuIsa::kBaseline);
}

TEST(FewRowsGemm, AnOutputHasTheSameBitsInAnyTileAndForAnyThreadCount) {
  // Row 5 of x computed among 7 rows (a tile of 4, then 3) and alone; the first 9 rows of w
  // among 50 (tiles of 4 or 2, blocks split between threads) and alone.
  const int m = 7, n = 50, k = 301;
  const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m) * k, 1);
  const std::vector<float> w = testing::RandomFloats(static_cast<size_t>(n) * k, 2);
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    if (!FewRowsGemmApplies(m)) continue;  // the BLAS sgemm promises no such thing
    SCOPED_TRACE(CpuIsaName(level));
    const int threads = CpuThreads();
    SetCpuThreads(1);
    const std::vector<float> one = Multiply(m, n, k, x, w);
    SetCpuThreads(2);
    const std::vector<float> two = Multiply(m, n, k, x, w);
    SetCpuThreads(threads);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
    const std::vector<float> row5(x.begin() + 5 * k, x.begin() + 6 * k);
    const std::vector<float> alone = Multiply(1, n, k, row5, w);
    EXPECT_EQ(0, std::memcmp(alone.data(), one.data() + 5 * n, n * sizeof(float)));
    const std::vector<float> w9(w.begin(), w.begin() + 9 * k);
    const std::vector<float> nine = Multiply(m, 9, k, x, w9);
    for (int i = 0; i < m; ++i)
      EXPECT_EQ(0, std::memcmp(nine.data() + i * 9, one.data() + i * n, 9 * sizeof(float))) << i;
  }
}

// The backward's outputs: dw (n x k) = dy^T x (+ dw0 when accumulating), dx (m x k) = dy w.
struct Gradients {
  std::vector<float> dw, dx;
};

Gradients Backward(int m, int n, int k, const std::vector<float>& dy, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>* dw0, bool want_dw = true,
                   bool want_dx = true) {
  Gradients g;
  if (want_dw) g.dw = dw0 ? *dw0 : std::vector<float>(static_cast<size_t>(n) * k, std::nanf(""));
  if (want_dx) g.dx.assign(static_cast<size_t>(m) * k, std::nanf(""));
  GemmFewRowsBackward(m, n, k, dy.data(), x.data(), w.data(), want_dw ? g.dw.data() : nullptr,
                      dw0 != nullptr, want_dx ? g.dx.data() : nullptr);
  return g;
}

// Each gradient against a double-precision sum, within float rounding of its terms.
void ExpectGradients(int m, int n, int k, const std::vector<float>& dy, const std::vector<float>& x,
                     const std::vector<float>& w, const std::vector<float>* dw0,
                     const Gradients& g) {
  auto at = [](const std::vector<float>& v, int row, int cols, int col) {
    return double{v[static_cast<size_t>(row) * cols + col]};
  };
  for (int j = 0; j < n && !g.dw.empty(); ++j) {
    for (int t = 0; t < k; ++t) {
      double sum = dw0 ? at(*dw0, j, k, t) : 0, magnitude = std::fabs(sum);
      for (int i = 0; i < m; ++i) {
        const double p = at(dy, i, n, j) * at(x, i, k, t);
        sum += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(at(g.dw, j, k, t), sum, (m + 2) * 6e-8 * magnitude + 1e-30)
          << "dw m " << m << " n " << n << " k " << k << " at " << j << "," << t;
    }
  }
  for (int i = 0; i < m && !g.dx.empty(); ++i) {
    for (int t = 0; t < k; ++t) {
      double sum = 0, magnitude = 0;
      for (int j = 0; j < n; ++j) {
        const double p = at(dy, i, n, j) * at(w, j, k, t);
        sum += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(at(g.dx, i, k, t), sum, (n + 1) * 6e-8 * magnitude + 1e-30)
          << "dx m " << m << " n " << n << " k " << k << " at " << i << "," << t;
    }
  }
}

TEST(FewRowsGemmBackward, EveryShapeOnEveryLevelIsTheGradient) {
  // Rows of dy up to and past the limit; w's rows with and without a remainder of the 8 (4)
  // taken together; columns with and without a vector tail and beyond one block of 128.
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    for (int m : {1, 3, 16, kFewRowsGemmMaxRows, kFewRowsGemmMaxRows + 1}) {
      for (int k : {1, 7, 16, 37, 300}) {
        for (int n : {1, 3, 9, 50}) {
          const std::vector<float> dy =
              testing::RandomFloats(static_cast<size_t>(m) * n, m * 7 + n);
          const std::vector<float> x =
              testing::RandomFloats(static_cast<size_t>(m) * k, m * 31 + k);
          const std::vector<float> w =
              testing::RandomFloats(static_cast<size_t>(n) * k, n * 17 + k);
          const std::vector<float> dw0 =
              testing::RandomFloats(static_cast<size_t>(n) * k, n * 5 + k);
          ExpectGradients(m, n, k, dy, x, w, nullptr, Backward(m, n, k, dy, x, w, nullptr));
          ExpectGradients(m, n, k, dy, x, w, &dw0, Backward(m, n, k, dy, x, w, &dw0));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(FewRowsGemmBackward, OneGradientAloneHasTheSameBitsAndTheOtherIsUntouched) {
  const int m = 5, n = 19, k = 300;
  const std::vector<float> dy = testing::RandomFloats(static_cast<size_t>(m) * n, 3);
  const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m) * k, 4);
  const std::vector<float> w = testing::RandomFloats(static_cast<size_t>(n) * k, 5);
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    SCOPED_TRACE(CpuIsaName(level));
    const Gradients both = Backward(m, n, k, dy, x, w, nullptr);
    const Gradients dw = Backward(m, n, k, dy, x, w, nullptr, true, false);
    const Gradients dx = Backward(m, n, k, dy, x, w, nullptr, false, true);
    EXPECT_TRUE(dw.dx.empty() && dx.dw.empty());
    EXPECT_EQ(0, std::memcmp(both.dw.data(), dw.dw.data(), both.dw.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(both.dx.data(), dx.dx.data(), both.dx.size() * sizeof(float)));
  }
}

TEST(FewRowsGemmBackward, TheBitsDoNotDependOnTheThreadCount) {
  // Enough work to run in parallel, column blocks split between the threads.
  const int m = 16, n = 70, k = 1000;
  const std::vector<float> dy = testing::RandomFloats(static_cast<size_t>(m) * n, 6);
  const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m) * k, 7);
  const std::vector<float> w = testing::RandomFloats(static_cast<size_t>(n) * k, 8);
  const std::vector<float> dw0 = testing::RandomFloats(static_cast<size_t>(n) * k, 9);
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    if (!FewRowsGemmApplies(m)) continue;  // the BLAS promises no such thing
    SCOPED_TRACE(CpuIsaName(level));
    const int threads = CpuThreads();
    SetCpuThreads(1);
    const Gradients one = Backward(m, n, k, dy, x, w, &dw0);
    SetCpuThreads(2);
    const Gradients two = Backward(m, n, k, dy, x, w, &dw0);
    SetCpuThreads(threads);
    EXPECT_EQ(0, std::memcmp(one.dw.data(), two.dw.data(), one.dw.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(one.dx.data(), two.dx.data(), one.dx.size() * sizeof(float)));
  }
}

TEST(FewRowsGemmBackward, TheFusedSgdStepHasTheBitsOfTheStepAfterwards) {
  // Columns with a tail past the vectors; rows with a remainder of the 8 (4) taken together.
  const int m = 6, n = 11, k = 203;
  const std::vector<float> dy = testing::RandomFloats(static_cast<size_t>(m) * n, 10);
  const std::vector<float> x = testing::RandomFloats(static_cast<size_t>(m) * k, 11);
  const std::vector<float> w0 = testing::RandomFloats(static_cast<size_t>(n) * k, 12);
  const std::vector<float> h0 = testing::RandomFloats(static_cast<size_t>(n) * k, 13);
  const float rate = 0.01f, momentum = 0.9f, decay = 0.0005f;
  for (CpuIsa level : kLevels) {
    ScopedCpuIsaLimit limit(level);
    SCOPED_TRACE(CpuIsaName(level));
    std::vector<float> w = w0, h = h0, dw(w.size()), dx(static_cast<size_t>(m) * k);
    const FewRowsSgdStep step{rate, momentum, decay, w.data(), h.data()};
    GemmFewRowsBackward(m, n, k, dy.data(), x.data(), w.data(), dw.data(), false, dx.data(), &step);
    std::vector<float> w_after = w0, h_after = h0;
    const Gradients g = Backward(m, n, k, dy, x, w0, nullptr);
    std::vector<float> dw_after = g.dw;
    SgdL2Step<float>(static_cast<int64_t>(w_after.size()), rate, momentum, decay, w_after.data(),
                     dw_after.data(), h_after.data());
    const size_t bytes = w.size() * sizeof(float);
    EXPECT_EQ(0, std::memcmp(w.data(), w_after.data(), bytes));
    EXPECT_EQ(0, std::memcmp(h.data(), h_after.data(), bytes));
    EXPECT_EQ(0, std::memcmp(dw.data(), dw_after.data(), bytes));  // the update, as Caffe leaves it
    EXPECT_EQ(0, std::memcmp(dx.data(), g.dx.data(), dx.size() * sizeof(float)));  // old weights
  }
}

}  // namespace
}  // namespace crema::cpu
