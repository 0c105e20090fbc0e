// Element-type conversion (math/convert.hpp): float32 -> float16/bfloat16 rounds to nearest,
// ties to even, as the scalar reference in core/half.hpp; back is exact; specials survive; the
// GPU converts to the same bits.
#include "math/convert.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "crema/blob.hpp"
#include "crema/device.hpp"

namespace crema {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Random floats over the whole range of exponents float16 and bfloat16 see, with specials.
std::vector<float> Values() {
  std::mt19937 rng(7);
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               65504.0f,
                               65520.0f,
                               1e-8f,
                               6e-8f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               3.0e38f,
                               FromBits(0x3f808000u),   // 1 + 2^-8: a bfloat16 tie, to even
                               FromBits(0x3f818000u),   // 1 + 3 * 2^-8: a tie, up
                               FromBits(0x3f801000u)};  // 1 + 2^-11: a float16 tie
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  for (int i = 0; i < 3000; ++i) values.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  return values;
}

TEST(Convert, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80);  // tie: stays even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82);  // tie: up to even
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(FloatToBFloat16(FromBits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
}

TEST(Convert, CpuMatchesTheScalarReferenceBothWays) {
  const std::vector<float> x = Values();
  const int64_t n = static_cast<int64_t>(x.size());
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<uint16_t> h(n);
    cpu::Convert(n, DataType::kFloat32, x.data(), half, h.data());
    std::vector<float> back(n);
    cpu::Convert(n, half, h.data(), DataType::kFloat32, back.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = half == DataType::kFloat16 ? FloatToHalf(x[i]) : FloatToBFloat16(x[i]);
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(back[i]));
        continue;
      }
      ASSERT_EQ(h[i], want) << DataTypeName(half) << " " << x[i];
      const float widened = half == DataType::kFloat16 ? HalfToFloat(want) : BFloat16ToFloat(want);
      ASSERT_EQ(std::memcmp(&back[i], &widened, 4), 0) << x[i];
    }
  }
  // float16 -> bfloat16 goes through float32 (exact widening, one rounding).
  std::vector<uint16_t> h(n), b(n);
  cpu::Convert(n, DataType::kFloat32, x.data(), DataType::kFloat16, h.data());
  cpu::Convert(n, DataType::kFloat16, h.data(), DataType::kBFloat16, b.data());
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(x[i])) {
      ASSERT_EQ(b[i], FloatToBFloat16(HalfToFloat(h[i]))) << x[i];
    }
  }
}

TEST(Convert, HalfPrecisionBlobsReadAsDouble) {
  Blob blob({4}, DataType::kBFloat16);
  const float x[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  cpu::Convert(4, DataType::kFloat32, x, DataType::kBFloat16, blob.data()->mutable_cpu_data());
  EXPECT_EQ(blob.data_at(1), -2.0);
  EXPECT_DOUBLE_EQ(blob.asum_data(), 6.75);
  EXPECT_DOUBLE_EQ(blob.sumsq_data(), 2.25 + 4 + 0.0625 + 9);
}

#ifdef CREMA_WITH_CUDA
TEST(Convert, GpuGivesTheCpuBits) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> x = Values();
  const int64_t n = static_cast<int64_t>(x.size());
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16}) {
    Blob source({static_cast<int>(n)});
    std::memcpy(source.mutable_cpu_data<float>(), x.data(), n * 4);
    Blob narrow({static_cast<int>(n)}, half);
    gpu::Convert(n, DataType::kFloat32, source.gpu_data<float>(), half,
                 narrow.data()->mutable_gpu_data());
    std::vector<uint16_t> want(n);
    cpu::Convert(n, DataType::kFloat32, x.data(), half, want.data());
    const auto* got = static_cast<const uint16_t*>(narrow.data()->cpu_data());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isnan(x[i])) {
        ASSERT_EQ(got[i], want[i]) << DataTypeName(half) << " " << x[i];
      }
    }
  }
}
#endif

}  // namespace
}  // namespace crema
