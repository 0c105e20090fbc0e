#include "math/math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "core/rng.hpp"

namespace crema::cpu {
namespace {

template <typename T>
class MathTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MathTest, FloatTypes);

template <typename T>
std::vector<T> RandomVector(size_t n, T low = T(-1), T high = T(1)) {
  std::vector<T> v(n);
  RngUniform<T>(static_cast<int64_t>(n), low, high, v.data());
  return v;
}

template <typename T>
T Tolerance() {
  return std::is_same<T, float>::value ? T(1e-4) : T(1e-10);
}

TYPED_TEST(MathTest, GemmMatchesNaiveLoopForAllTransposes) {
  using T = TypeParam;
  SetRandomSeed(1);
  const int m = 5, n = 7, k = 3;
  const T alpha = T(1.5), beta = T(-0.5);
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      const std::vector<T> a = RandomVector<T>(m * k);
      const std::vector<T> b = RandomVector<T>(k * n);
      std::vector<T> c = RandomVector<T>(m * n);
      std::vector<T> expected(c);
      // op(A)(i, p): A stored M x K (no transpose) or K x M (transpose), both row-major.
      auto at = [&](int i, int p) { return ta == Trans::kNo ? a[i * k + p] : a[p * m + i]; };
      auto bt = [&](int p, int j) { return tb == Trans::kNo ? b[p * n + j] : b[j * k + p]; };
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          T sum = 0;
          for (int p = 0; p < k; ++p) sum += at(i, p) * bt(p, j);
          expected[i * n + j] = alpha * sum + beta * expected[i * n + j];
        }
      }
      Gemm<T>(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, c.data());
      for (int i = 0; i < m * n; ++i) {
        EXPECT_NEAR(c[i], expected[i], Tolerance<T>())
            << "trans_a " << (ta == Trans::kYes) << " trans_b " << (tb == Trans::kYes) << " at "
            << i;
      }
    }
  }
}

TYPED_TEST(MathTest, GemvMatchesNaiveLoop) {
  using T = TypeParam;
  SetRandomSeed(2);
  const int m = 4, n = 6;
  const std::vector<T> a = RandomVector<T>(m * n);
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    const int x_len = ta == Trans::kNo ? n : m;
    const int y_len = ta == Trans::kNo ? m : n;
    const std::vector<T> x = RandomVector<T>(x_len);
    std::vector<T> y = RandomVector<T>(y_len);
    std::vector<T> expected(y);
    for (int i = 0; i < y_len; ++i) {
      T sum = 0;
      for (int j = 0; j < x_len; ++j)
        sum += (ta == Trans::kNo ? a[i * n + j] : a[j * n + i]) * x[j];
      expected[i] = T(2) * sum + T(3) * expected[i];
    }
    Gemv<T>(ta, m, n, T(2), a.data(), x.data(), T(3), y.data());
    for (int i = 0; i < y_len; ++i) EXPECT_NEAR(y[i], expected[i], Tolerance<T>());
  }
}

TYPED_TEST(MathTest, BlasLevelOne) {
  using T = TypeParam;
  const std::vector<T> x = {1, -2, 3, -4};
  std::vector<T> y = {0.5, 0.5, 0.5, 0.5};
  EXPECT_NEAR(Dot<T>(4, x.data(), y.data()), T(-1), Tolerance<T>());
  EXPECT_NEAR(Asum<T>(4, x.data()), T(10), Tolerance<T>());
  EXPECT_NEAR(StridedDot<T>(2, x.data(), 2, x.data(), 2), T(10), Tolerance<T>());  // 1 + 9

  Axpy<T>(4, T(2), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{2.5, -3.5, 6.5, -7.5}));
  Axpby<T>(4, T(1), x.data(), T(2), y.data());
  EXPECT_EQ(y, (std::vector<T>{6, -9, 16, -19}));
  Scal<T>(4, T(-1), y.data());
  EXPECT_EQ(y, (std::vector<T>{-6, 9, -16, 19}));
  Scale<T>(4, T(3), x.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{3, -6, 9, -12}));
  Copy<T>(4, x.data(), y.data());
  EXPECT_EQ(y, x);
  Set<T>(4, T(7), y.data());
  EXPECT_EQ(y, (std::vector<T>{7, 7, 7, 7}));
  Set<T>(4, T(0), y.data());
  EXPECT_EQ(y, (std::vector<T>{0, 0, 0, 0}));
  AddScalar<T>(4, T(1.5), y.data());
  EXPECT_EQ(y, (std::vector<T>{1.5, 1.5, 1.5, 1.5}));
}

TYPED_TEST(MathTest, ElementWise) {
  using T = TypeParam;
  const std::vector<T> a = {1, -2, 4, 0};
  const std::vector<T> b = {2, 4, -8, 1};
  std::vector<T> y(4);
  Add<T>(4, a.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{3, 2, -4, 1}));
  Sub<T>(4, a.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{-1, -6, 12, -1}));
  Mul<T>(4, a.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{2, -8, -32, 0}));
  Div<T>(4, a.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{0.5, -0.5, -0.5, 0}));
  Sqr<T>(4, a.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, 4, 16, 0}));
  Abs<T>(4, a.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, 2, 4, 0}));
  Sign<T>(4, a.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, -1, 1, 0}));
  const std::vector<T> positive = {1, 4, 9, 0.25};
  Sqrt<T>(4, positive.data(), y.data());
  EXPECT_EQ(y, (std::vector<T>{1, 2, 3, 0.5}));
  Powx<T>(4, positive.data(), T(1.5), y.data());
  EXPECT_NEAR(y[2], T(27), Tolerance<T>());
  Exp<T>(4, a.data(), y.data());
  EXPECT_NEAR(y[1], std::exp(T(-2)), Tolerance<T>());
  Log<T>(4, positive.data(), y.data());
  EXPECT_NEAR(y[1], std::log(T(4)), Tolerance<T>());
}

TYPED_TEST(MathTest, LargeElementWiseTakesTheParallelPath) {
  using T = TypeParam;
  const int64_t n = 100000;
  std::vector<T> a(n), b(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(i % 97);
    b[i] = static_cast<T>(i % 13);
  }
  Add<T>(n, a.data(), b.data(), y.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] + b[i]) << i;
}

TYPED_TEST(MathTest, RngUniformStaysInClosedRange) {
  using T = TypeParam;
  SetRandomSeed(3);
  std::vector<T> r = RandomVector<T>(10000, T(2), T(3));
  T sum = 0;
  for (T v : r) {
    ASSERT_GE(v, T(2));
    ASSERT_LE(v, T(3));
    sum += v;
  }
  EXPECT_NEAR(sum / r.size(), T(2.5), T(0.02));
  // A degenerate range is allowed (Caffe widens b by one ulp) and returns a.
  r = RandomVector<T>(10, T(5), T(5));
  for (T v : r) EXPECT_EQ(v, T(5));
}

TYPED_TEST(MathTest, RngGaussianAndBernoulliStatistics) {
  using T = TypeParam;
  SetRandomSeed(4);
  const int64_t n = 100000;
  std::vector<T> g(n);
  RngGaussian<T>(n, T(1), T(2), g.data());
  double sum = 0, sum_sq = 0;
  for (T v : g) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 2.0, 0.05);

  std::vector<int> mask(n);
  RngBernoulli<T>(n, T(0.3), mask.data());
  int64_t ones = 0;
  for (int v : mask) {
    ASSERT_TRUE(v == 0 || v == 1);
    ones += v;
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.3, 0.01);
}

TEST(MathRngTest, SameSeedSameSequence) {
  std::vector<float> first(100), second(100);
  SetRandomSeed(1234);
  RngGaussian<float>(100, 0.f, 1.f, first.data());
  SetRandomSeed(1234);
  RngGaussian<float>(100, 0.f, 1.f, second.data());
  EXPECT_EQ(first, second);
  SetRandomSeed(1235);
  RngGaussian<float>(100, 0.f, 1.f, second.data());
  EXPECT_NE(first, second);

  std::vector<unsigned int> bits(1000);
  RngBernoulliUnsigned(1000, 0.5, bits.data());
  int ones = 0;
  for (unsigned int b : bits) ones += static_cast<int>(b);
  EXPECT_GT(ones, 400);
  EXPECT_LT(ones, 600);
}

TEST(MathRngTest, NewThreadsDeriveTheirStreamFromTheSeed) {
  auto draw_in_thread = [] {
    std::vector<double> values(16);
    std::thread worker([&] { RngUniform<double>(16, 0.0, 1.0, values.data()); });
    worker.join();
    return values;
  };
  SetRandomSeed(99);
  const std::vector<double> main_values = RandomVector<double>(16, 0.0, 1.0);
  const std::vector<double> first = draw_in_thread();
  SetRandomSeed(99);
  EXPECT_EQ(RandomVector<double>(16, 0.0, 1.0), main_values);
  EXPECT_EQ(draw_in_thread(), first);
  // A worker does not replay the seeding thread's stream.
  EXPECT_NE(first, main_values);
}

}  // namespace
}  // namespace crema::cpu
