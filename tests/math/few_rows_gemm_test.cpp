#include "math/few_rows_gemm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "math/blas_setup.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {
namespace {

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

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
          const std::vector<float> x = Random(static_cast<size_t>(m) * k, m * 31 + k);
          const std::vector<float> w = Random(static_cast<size_t>(n) * k, n * 17 + k);
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
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 1);
  const std::vector<float> w = Random(static_cast<size_t>(n) * k, 2);
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

}  // namespace
}  // namespace crema::cpu
