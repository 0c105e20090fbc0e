// The fused 1x1 + 3x3 depthwise convolution kernel, and the 1x1 and depthwise ones alone
// (math/pointwise_depthwise.hpp), against a scalar reference that computes each output with the
// same operations in the same order (the bias, then fused multiply-adds over the input channels
// or the taps, then crema's ReLU): the same bits, over shapes with partial position tiles, both
// strides, odd sizes, several images and threads, leaky and missing ReLUs and biases.
#include "math/pointwise_depthwise.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "math/cpu_isa.hpp"
#include "support/kernel_data.hpp"

namespace crema::cpu {
namespace {

struct Case {
  PointwiseDepthwiseShape shape;
  int batch = 1;
  bool pw_bias = true, dw_bias = true;
  const float* pw_relu = nullptr;
  const float* dw_relu = nullptr;
};

// The ReLU layer's expression (math/activation.hpp), or none.
float Relu(float v, const float* slope) {
  return slope ? std::max(v, 0.f) + *slope * std::min(v, 0.f) : v;
}

// The 1x1 convolution: x blocked; returns its output blocked.
std::vector<float> PointwiseReference(const Case& c, const std::vector<float>& x,
                                      const std::vector<float>& pw,
                                      const std::vector<float>& pw_bias) {
  const PointwiseDepthwiseShape& s = c.shape;
  const int H = s.height, W = s.width;
  std::vector<float> mid(static_cast<size_t>(c.batch) * s.channels * H * W);
  for (int n = 0; n < c.batch; ++n)
    for (int oc = 0; oc < s.channels; ++oc)
      for (int h = 0; h < H; ++h)
        for (int w = 0; w < W; ++w) {
          float acc = c.pw_bias ? pw_bias[oc] : 0.f;
          for (int ic = 0; ic < s.in_channels; ++ic)
            acc = std::fma(x[testing::Blocked16(n, ic, h, w, s.in_channels, H, W)],
                           pw[static_cast<size_t>(oc) * s.in_channels + ic], acc);
          mid[testing::Blocked16(n, oc, h, w, s.channels, H, W)] = Relu(acc, c.pw_relu);
        }
  return mid;
}

// The depthwise convolution: mid (channels) blocked; returns its output blocked.
std::vector<float> DepthwiseReference(const Case& c, const std::vector<float>& mid,
                                      const std::vector<float>& dw,
                                      const std::vector<float>& dw_bias) {
  const PointwiseDepthwiseShape& s = c.shape;
  const int H = s.height, W = s.width, OH = s.out_height(), OW = s.out_width();
  std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * OH * OW);
  for (int n = 0; n < c.batch; ++n)
    for (int ch = 0; ch < s.channels; ++ch)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          float acc = c.dw_bias ? dw_bias[ch] : 0.f;
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              const int h = oh * s.stride - 1 + kh, w = ow * s.stride - 1 + kw;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              acc = std::fma(mid[testing::Blocked16(n, ch, h, w, s.channels, H, W)],
                             dw[ch * 9 + kh * 3 + kw], acc);
            }
          y[testing::Blocked16(n, ch, oh, ow, s.channels, OH, OW)] = Relu(acc, c.dw_relu);
        }
  return y;
}

// x blocked; returns y blocked.
std::vector<float> Reference(const Case& c, const std::vector<float>& x,
                             const std::vector<float>& pw, const std::vector<float>& pw_bias,
                             const std::vector<float>& dw, const std::vector<float>& dw_bias) {
  return DepthwiseReference(c, PointwiseReference(c, x, pw, pw_bias), dw, dw_bias);
}

// The operands of a kernel alone, its output y filled with NaN first.
AloneArgs Alone(const std::vector<float>& x, const std::vector<float>& packed, const float* bias,
                const float* relu, std::vector<float>* y, int threads) {
  std::fill(y->begin(), y->end(), NAN);
  AloneArgs a;
  a.x = x.data();
  a.weights = packed.data();
  a.bias = bias;
  a.relu = relu;
  a.y = y->data();
  a.threads = threads;
  return a;
}

// y is `expected` bit for bit (`what` names the case).
void ExpectSameBits(const std::vector<float>& expected, const std::vector<float>& y,
                    const std::string& what) {
  ASSERT_EQ(expected.size(), y.size());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(0, std::memcmp(&expected[i], &y[i], sizeof(float)))
        << "element " << i << " of " << y.size() << ": " << expected[i] << " vs " << y[i] << " ("
        << what << ")";
}

void ExpectSameAsReference(const Case& c, int threads) {
  const PointwiseDepthwiseShape& s = c.shape;
  ASSERT_TRUE(PointwiseDepthwiseApplies(s));
  const auto x =
      testing::RandomFloats(static_cast<size_t>(c.batch) * s.in_channels * s.height * s.width, 1);
  const auto pw = testing::RandomFloats(static_cast<size_t>(s.channels) * s.in_channels, 2);
  const auto pw_bias = testing::RandomFloats(s.channels, 3);
  const auto dw = testing::RandomFloats(static_cast<size_t>(s.channels) * 9, 4);
  const auto dw_bias = testing::RandomFloats(s.channels, 5);
  std::vector<float> pw_packed(pw.size()), dw_packed(dw.size());
  PackPointwiseWeights(s, pw.data(), pw_packed.data());
  PackDepthwiseWeights(s, dw.data(), dw_packed.data());
  std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * s.out_height() * s.out_width(),
                       std::nanf(""));
  std::vector<float> scratch(PointwiseDepthwiseScratchFloats(s, threads));
  PointwiseDepthwiseArgs a;
  a.x = x.data();
  a.pointwise = pw_packed.data();
  a.pointwise_bias = c.pw_bias ? pw_bias.data() : nullptr;
  a.pointwise_relu = c.pw_relu;
  a.depthwise = dw_packed.data();
  a.depthwise_bias = c.dw_bias ? dw_bias.data() : nullptr;
  a.depthwise_relu = c.dw_relu;
  a.y = y.data();
  a.threads = threads;
  a.scratch = scratch.data();
  PointwiseDepthwiseForward(s, c.batch, a);
  ExpectSameBits(Reference(c, x, pw, pw_bias, dw, dw_bias), y,
                 "in " + std::to_string(s.in_channels) + ", out " + std::to_string(s.channels) +
                     ", " + std::to_string(s.height) + "x" + std::to_string(s.width) + ", stride " +
                     std::to_string(s.stride) + ", batch " + std::to_string(c.batch) +
                     ", threads " + std::to_string(threads));
}

class PointwiseDepthwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CpuIsaLevel() != CpuIsa::kAvx512) GTEST_SKIP() << "the kernel needs AVX-512";
  }
};

TEST_F(PointwiseDepthwise, EqualsTheLayersOperationsInOrder) {
  const float zero = 0.f, leaky = 0.1f;
  // in, out, height, width, stride: whole and partial 7-position tiles, one to five output
  // blocks (groups of three, two and one), more than one chunk of 16 input blocks, a
  // one-row and a one-column image.
  const int shapes[][5] = {{32, 64, 14, 14, 2}, {16, 48, 9, 11, 1},  {64, 80, 8, 5, 2},
                           {272, 32, 7, 7, 1},  {16, 16, 1, 1, 1},   {32, 64, 1, 13, 2},
                           {48, 16, 13, 1, 1},  {16, 32, 12, 12, 2}, {288, 64, 6, 21, 1}};
  for (const auto& v : shapes) {
    Case c;
    c.shape = {v[0], v[1], v[2], v[3], v[4]};
    c.pw_relu = &zero;
    c.dw_relu = &zero;
    ExpectSameAsReference(c, 1);
  }
  Case c;
  c.shape = {32, 48, 10, 9, 2};
  c.batch = 3;
  c.pw_relu = &leaky;
  c.dw_relu = nullptr;
  c.pw_bias = false;
  ExpectSameAsReference(c, 1);
  ExpectSameAsReference(c, 2);  // rows of one image split between the threads
  c.shape.stride = 1;
  c.pw_relu = nullptr;
  c.dw_relu = &leaky;
  c.pw_bias = true;
  c.dw_bias = false;
  ExpectSameAsReference(c, 2);
  // More threads than output rows (one): a thread with none. (Two threads: LeakSanitizer
  // reports what libomp allocates for more threads than the cores of a 2-core machine.)
  c.shape = {16, 32, 2, 9, 2};
  c.batch = 1;
  ExpectSameAsReference(c, 2);
}

// The 1x1 convolution alone (PointwiseForward) over the same kinds of shapes, with threads
// sharing an image's tiles and groups, and images sharing a group's weights.
TEST_F(PointwiseDepthwise, PointwiseAloneEqualsTheOperationsInOrder) {
  const float leaky = 0.1f;
  // in, out, height, width, batch, threads.
  // (17 and 33 input blocks: two and three chunks.)
  const int cases[][6] = {{32, 64, 7, 7, 1, 1},   {16, 48, 9, 11, 1, 2}, {272, 80, 5, 3, 2, 1},
                          {528, 32, 6, 21, 3, 2}, {16, 16, 1, 1, 1, 2},  {48, 112, 4, 4, 2, 2}};
  for (const auto& v : cases) {
    Case c;
    c.shape = {v[0], v[1], v[2], v[3], 1};
    c.batch = v[4];
    c.pw_relu = v[5] == 2 ? &leaky : nullptr;
    c.pw_bias = v[4] != 2;
    const PointwiseDepthwiseShape& s = c.shape;
    const int positions = s.height * s.width;
    ASSERT_TRUE(PointwiseApplies(s.in_channels, s.channels, positions));
    const auto x =
        testing::RandomFloats(static_cast<size_t>(c.batch) * s.in_channels * positions, 1);
    const auto pw = testing::RandomFloats(static_cast<size_t>(s.channels) * s.in_channels, 2);
    const auto pw_bias = testing::RandomFloats(s.channels, 3);
    std::vector<float> packed(pw.size());
    PackPointwiseWeights(s, pw.data(), packed.data());
    std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * positions);
    PointwiseForward(s.in_channels, s.channels, positions, c.batch,
                     Alone(x, packed, c.pw_bias ? pw_bias.data() : nullptr, c.pw_relu, &y, v[5]));
    ExpectSameBits(PointwiseReference(c, x, pw, pw_bias), y,
                   "in " + std::to_string(s.in_channels) + ", out " + std::to_string(s.channels) +
                       ", " + std::to_string(s.height) + "x" + std::to_string(s.width) +
                       ", batch " + std::to_string(c.batch) + ", threads " + std::to_string(v[5]));
  }
}

// The depthwise convolution alone (DepthwiseForward), both strides, with threads sharing a
// plane's rows.
TEST_F(PointwiseDepthwise, DepthwiseAloneEqualsTheOperationsInOrder) {
  const float leaky = 0.1f;
  // channels, height, width, stride, batch, threads: whole and partial 8-output runs, one-row and
  // one-column images, odd sizes, a thread's share ending inside a plane.
  const int cases[][6] = {{16, 14, 14, 1, 1, 1}, {32, 9, 11, 2, 1, 2}, {48, 7, 7, 1, 2, 2},
                          {16, 1, 13, 2, 3, 1},  {32, 13, 1, 1, 1, 2}, {64, 5, 21, 2, 2, 2}};
  for (const auto& v : cases) {
    Case c;
    c.shape = {v[0], v[0], v[1], v[2], v[3]};
    c.batch = v[4];
    c.dw_relu = v[5] == 2 ? &leaky : nullptr;
    c.dw_bias = v[4] != 2;
    const PointwiseDepthwiseShape& s = c.shape;
    ASSERT_TRUE(PointwiseDepthwiseApplies(s));
    const auto x =
        testing::RandomFloats(static_cast<size_t>(c.batch) * s.channels * s.height * s.width, 1);
    const auto dw = testing::RandomFloats(static_cast<size_t>(s.channels) * 9, 4);
    const auto dw_bias = testing::RandomFloats(s.channels, 5);
    std::vector<float> packed(dw.size());
    PackDepthwiseWeights(s, dw.data(), packed.data());
    std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * s.out_height() *
                         s.out_width());
    DepthwiseForward(s, c.batch,
                     Alone(x, packed, c.dw_bias ? dw_bias.data() : nullptr, c.dw_relu, &y, v[5]));
    ExpectSameBits(DepthwiseReference(c, x, dw, dw_bias), y,
                   std::to_string(s.channels) + " channels, " + std::to_string(s.height) + "x" +
                       std::to_string(s.width) + ", stride " + std::to_string(s.stride) +
                       ", batch " + std::to_string(c.batch) + ", threads " + std::to_string(v[5]));
  }
}

TEST_F(PointwiseDepthwise, AppliesOnlyToWholeBlocksAndItsStrides) {
  EXPECT_TRUE(PointwiseDepthwiseApplies({32, 64, 112, 112, 2}));
  EXPECT_FALSE(PointwiseDepthwiseApplies({24, 64, 8, 8, 1}));
  EXPECT_FALSE(PointwiseDepthwiseApplies({32, 40, 8, 8, 1}));
  EXPECT_FALSE(PointwiseDepthwiseApplies({32, 64, 8, 8, 3}));
  EXPECT_FALSE(PointwiseDepthwiseApplies({32, 64, 0, 8, 1}));
  EXPECT_TRUE(PointwiseApplies(1024, 1024, 49));
  EXPECT_FALSE(PointwiseApplies(1000, 1024, 49));
  EXPECT_FALSE(PointwiseApplies(1024, 1024, 0));
  ScopedCpuIsaLimit avx2(CpuIsa::kAvx2Fma);
  EXPECT_FALSE(PointwiseDepthwiseApplies({32, 64, 112, 112, 2}));
  EXPECT_FALSE(PointwiseApplies(1024, 1024, 49));
}

}  // namespace
}  // namespace crema::cpu
