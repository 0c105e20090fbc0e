// crema's 3x3 convolution on the channel-blocked layout (math/blocked_conv.hpp) against a scalar
// reference that computes each output with the same operations in the same order (the bias, then
// fused multiply-adds input block by input block, in a block tap by tap and channel by channel,
// then crema's ReLU): the same bits, over shapes with partial position tiles, one to five output
// blocks (groups of three, two and one), one-row and one-column images, several images and
// threads, leaky and missing ReLUs and biases, blocked and plain inputs.
#include "math/blocked_conv.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "math/cpu_isa.hpp"
#include "support/kernel_data.hpp"

namespace crema::cpu {
namespace {

struct Case {
  BlockedConvShape shape;
  int batch = 1;
  bool bias = true;
  const float* relu = nullptr;
  bool plain = false;  // x in the plain layout
};

// x blocked (or plain), w Caffe's; returns y blocked.
std::vector<float> Reference(const Case& c, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& bias) {
  const BlockedConvShape& s = c.shape;
  const int H = s.height, W = s.width, C = s.in_channels;
  std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * H * W);
  for (int n = 0; n < c.batch; ++n)
    for (int oc = 0; oc < s.channels; ++oc)
      for (int h = 0; h < H; ++h)
        for (int ww = 0; ww < W; ++ww) {
          float acc = c.bias ? bias[oc] : 0.f;
          for (int cb = 0; cb < C / 16; ++cb)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw)
                for (int i = 0; i < 16; ++i) {
                  const int ic = cb * 16 + i, ih = h - 1 + kh, iw = ww - 1 + kw;
                  // (Outside the image the kernel multiplies its border's zeros.)
                  const size_t at = c.plain ? ((static_cast<size_t>(n) * C + ic) * H + ih) * W + iw
                                            : testing::Blocked16(n, ic, ih, iw, C, H, W);
                  const float v = ih < 0 || ih >= H || iw < 0 || iw >= W ? 0.f : x[at];
                  acc = std::fma(v, w[((static_cast<size_t>(oc) * C + ic) * 3 + kh) * 3 + kw], acc);
                }
          if (c.relu != nullptr) acc = std::max(acc, 0.f) + *c.relu * std::min(acc, 0.f);
          y[testing::Blocked16(n, oc, h, ww, s.channels, H, W)] = acc;
        }
  return y;
}

void ExpectSameAsReference(const Case& c, int threads) {
  const BlockedConvShape& s = c.shape;
  ASSERT_TRUE(BlockedConv3x3Applies(s));
  const auto x =
      testing::RandomFloats(static_cast<size_t>(c.batch) * s.in_channels * s.height * s.width, 1);
  const auto w = testing::RandomFloats(static_cast<size_t>(s.channels) * s.in_channels * 9, 2);
  const auto bias = testing::RandomFloats(s.channels, 3);
  std::vector<float> packed(w.size());
  PackBlockedConv3x3Weights(s, w.data(), packed.data());
  std::vector<float> scratch(BlockedConv3x3ScratchFloats(s, c.batch));
  std::vector<float> y(static_cast<size_t>(c.batch) * s.channels * s.height * s.width, NAN);
  BlockedConvArgs a;
  a.x = x.data();
  a.x_plain = c.plain;
  a.weights = packed.data();
  a.bias = c.bias ? bias.data() : nullptr;
  a.relu = c.relu;
  a.y = y.data();
  a.threads = threads;
  a.scratch = scratch.data();
  BlockedConv3x3Forward(s, c.batch, a);
  const std::vector<float> expected = Reference(c, x, w, bias);
  ASSERT_EQ(expected.size(), y.size());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(0, std::memcmp(&expected[i], &y[i], sizeof(float)))
        << "element " << i << " of " << y.size() << ": " << expected[i] << " vs " << y[i] << " (in "
        << s.in_channels << ", out " << s.channels << ", " << s.height << "x" << s.width
        << ", batch " << c.batch << ", threads " << threads << (c.plain ? ", plain x" : "") << ")";
}

class BlockedConv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CpuIsaLevel() != CpuIsa::kAvx512) GTEST_SKIP() << "the kernel needs AVX-512";
  }
};

TEST_F(BlockedConv, EqualsTheOperationsInOrder) {
  const float zero = 0.f, leaky = 0.1f;
  // in, out, height, width: whole and partial 7-position tiles, one to five output blocks (a
  // group of three, of two, two and two, of one), one-row, one-column and one-position images.
  const int shapes[][4] = {{32, 48, 7, 7},  {16, 16, 5, 9},  {48, 32, 9, 11}, {16, 64, 6, 8},
                           {32, 80, 3, 14}, {16, 16, 1, 1},  {32, 48, 1, 13}, {48, 16, 13, 1},
                           {64, 112, 4, 4}, {16, 128, 2, 15}};
  for (const auto& v : shapes) {
    Case c;
    c.shape = {v[0], v[1], v[2], v[3]};
    c.relu = &zero;
    ExpectSameAsReference(c, 1);
  }
  Case c;
  c.shape = {32, 48, 10, 9};
  c.batch = 3;
  c.relu = &leaky;
  c.bias = false;
  ExpectSameAsReference(c, 1);
  ExpectSameAsReference(c, 2);  // the rows of an image's groups split between the threads
  c.relu = nullptr;
  c.bias = true;
  c.batch = 1;
  c.shape = {16, 80, 3, 7};  // groups of 3 and 2: a thread's share ends inside a group
  ExpectSameAsReference(c, 2);
  c.shape = {16, 16, 1, 5};  // one row of one block: a thread with nothing to do
  ExpectSameAsReference(c, 2);
  c.shape = {48, 32, 9, 11};  // an input in the plain layout
  c.batch = 2;
  c.plain = true;
  ExpectSameAsReference(c, 1);
  ExpectSameAsReference(c, 2);
}

TEST_F(BlockedConv, AppliesOnlyToWholeBlocks) {
  EXPECT_TRUE(BlockedConv3x3Applies({512, 512, 7, 7}));
  EXPECT_FALSE(BlockedConv3x3Applies({24, 64, 8, 8}));
  EXPECT_FALSE(BlockedConv3x3Applies({32, 40, 8, 8}));
  EXPECT_FALSE(BlockedConv3x3Applies({32, 64, 0, 8}));
  ScopedCpuIsaLimit avx2(CpuIsa::kAvx2Fma);
  EXPECT_FALSE(BlockedConv3x3Applies({512, 512, 7, 7}));
}

}  // namespace
}  // namespace crema::cpu
