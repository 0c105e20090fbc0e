// The GPU's per-channel helpers (math_gpu.hpp, built on math/channel_gpu.cuh) against plain CPU
// loops: per-channel sums (one segment or many, more channels than a grid has blocks, empty),
// bit-identical from run to run; the channel bias with a fused ReLU; the in-place ReLU. Skipped
// without a CUDA device.
#include "math/math_gpu.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "crema/blob.hpp"
#include "crema/device.hpp"

namespace crema {
namespace {

#ifdef CREMA_WITH_CUDA

void Fill(Blob* blob, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) x[i] = uniform(rng);
}

struct ReduceShape {
  int outer, dim, inner;
};

class ReduceByAxisGpu : public testing::TestWithParam<ReduceShape> {};

TEST_P(ReduceByAxisGpu, MatchesTheCpuSumAndRepeatsBitForBit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const ReduceShape s = GetParam();
  Blob a({s.outer, s.dim, s.inner}), b({s.outer, s.dim, s.inner});
  Fill(&a, 1);
  Fill(&b, 2);
  for (const bool product : {false, true}) {
    for (const bool accumulate : {false, true}) {
      Blob out1({s.dim}), out2({s.dim});
      Fill(&out1, 3);
      out2.CopyFrom(out1);
      std::vector<double> expected(s.dim);
      for (int d = 0; d < s.dim; ++d) {
        double sum = 0;
        for (int o = 0; o < s.outer; ++o)
          for (int i = 0; i < s.inner; ++i) {
            const int64_t k = (static_cast<int64_t>(o) * s.dim + d) * s.inner + i;
            sum += product ? static_cast<double>(a.cpu_data<float>()[k]) * b.cpu_data<float>()[k]
                           : a.cpu_data<float>()[k];
          }
        expected[d] = sum + (accumulate ? out1.cpu_data<float>()[d] : 0.0);
      }
      for (Blob* out : {&out1, &out2})
        gpu::ReduceByAxis<float>(s.outer, s.dim, s.inner, a.gpu_data<float>(),
                                 product ? b.gpu_data<float>() : nullptr, accumulate,
                                 out->mutable_gpu_data<float>());
      const float* got = out1.cpu_data<float>();
      for (int d = 0; d < s.dim; ++d)
        ASSERT_NEAR(got[d], expected[d], 1e-5 * (1 + std::abs(expected[d])))
            << "channel " << d << (product ? " product" : "") << (accumulate ? " accumulate" : "");
      EXPECT_EQ(std::memcmp(out1.cpu_data<float>(), out2.cpu_data<float>(), sizeof(float) * s.dim),
                0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReduceByAxisGpu,
                         testing::Values(ReduceShape{64, 16, 3136},  // many segments per channel
                                         ReduceShape{2, 3, 5},  // less than one warp per channel
                                         ReduceShape{7, 1, 50000},  // one channel over every block
                                         ReduceShape{3, 70000,
                                                     1},  // more channels than a grid has blocks
                                         ReduceShape{0, 4, 9},       // nothing to sum
                                         ReduceShape{5, 300, 49}));  // a row shorter than a block

TEST(ChannelBiasGpu, AddsTheBiasThenTheReLU) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const int outer = 3, channels = 5, inner = 37;
  Blob y({outer, channels, inner}), bias({channels});
  Fill(&y, 4);
  Fill(&bias, 5);
  std::vector<float> expected(y.count());
  for (int64_t k = 0; k < y.count(); ++k) {
    const float v = y.cpu_data<float>()[k] + bias.cpu_data<float>()[(k / inner) % channels];
    expected[k] = v > 0 ? v : v * 0.25f;
  }
  gpu::AddChannelBias<float>(outer, channels, inner, bias.gpu_data<float>(), true, 0.25f,
                             y.mutable_gpu_data<float>());
  EXPECT_EQ(std::memcmp(y.cpu_data<float>(), expected.data(), sizeof(float) * y.count()), 0);
  gpu::ReLUInPlace<float>(y.count(), 0.0f, y.mutable_gpu_data<float>());
  for (int64_t k = 0; k < y.count(); ++k) EXPECT_GE(y.cpu_data<float>()[k], 0.0f);
}

#else
TEST(MathGpu, NeedsCuda) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace crema
