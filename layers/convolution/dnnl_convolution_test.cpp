// The oneDNN engine of Convolution (dnnl_convolution.hpp) against crema's own kernels (policy
// caffe) on many geometries, a float numeric gradient under policy dnnl, the auto race, and the
// cases that must stay on crema's kernels. Skipped when crema is built without oneDNN.
#include "layers/convolution/dnnl_convolution.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda_context.hpp"
#include "core/rng.hpp"
#include "core/workspace.hpp"
#include "layers/convolution/convolution_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "support/gradient_checker.hpp"

namespace crema {
namespace {

using testing::FillGaussian;
using testing::ParseLayerParam;

struct ConvCase {
  const char* name;
  std::string param;  // the body of convolution_param, fillers added
  std::vector<int> shape;
};

std::ostream& operator<<(std::ostream& out, const ConvCase& c) { return out << c.name; }

LayerParameter ConvParam(const std::string& body) {
  return ParseLayerParam(
      "name: 'conv' type: 'Convolution' convolution_param { " + body +
      " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }");
}

std::vector<float> Data(const Blob& blob) {
  const float* p = blob.cpu_data<float>();
  return std::vector<float>(p, p + blob.count());
}

std::vector<float> Diff(const Blob& blob) {
  const float* p = blob.cpu_diff<float>();
  return std::vector<float>(p, p + blob.count());
}

void FillDiff(Blob* blob, float start) {
  float* diff = blob->mutable_cpu_diff<float>();
  for (int64_t i = 0; i < blob->count(); ++i) diff[i] = start + 0.01f * static_cast<float>(i % 97);
}

// What one layer computes under one policy: `passes` forward + backward passes on the same
// inputs (param diffs accumulate over them; they start at FillDiff(., 1)).
struct ConvResult {
  std::vector<float> top, bottom_diff, weight_diff, bias_diff;
  std::vector<std::string> engines;  // per pass: forward's engine, then backward's
};

ConvResult RunConv(const LayerParameter& param, const std::vector<int>& shape, CpuEngine policy,
                   int passes = 2, bool propagate_down = true) {
  ScopedCpuEngine scoped(policy);
  SetRandomSeed(1701);  // the same filled weights under every policy
  ConvolutionLayer layer(param);
  Blob bottom(shape), top;
  FillGaussian(&bottom, 0, 1, 11);
  layer.SetUp({&bottom}, {&top});
  for (const BlobPtr& blob : layer.blobs()) FillDiff(blob.get(), 1.0f);
  FillDiff(&bottom, 42.0f);
  ConvResult result;
  for (int pass = 0; pass < passes; ++pass) {
    layer.Forward({&bottom}, {&top});
    result.engines.push_back(layer.cpu_engine());
    result.top = Data(top);
    FillGaussian(&top, 0, 1, 13);  // into the data, then moved to the diff
    std::memcpy(top.mutable_cpu_diff<float>(), top.cpu_data<float>(), top.count() * sizeof(float));
    layer.Backward({&top}, {propagate_down}, {&bottom});
    result.engines.push_back(layer.cpu_engine());
  }
  result.bottom_diff = Diff(bottom);
  result.weight_diff = Diff(*layer.blobs()[0]);
  if (layer.blobs().size() > 1) result.bias_diff = Diff(*layer.blobs()[1]);
  return result;
}

// |a - b| <= 1e-4 * (max |expected| over the tensor + |expected element|).
void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-4 * (scale + std::fabs(expected[i])))
        << what << " element " << i;
}

void ExpectSameResults(const ConvResult& a, const ConvResult& b) {
  ExpectClose(a.top, b.top, "top");
  ExpectClose(a.bottom_diff, b.bottom_diff, "bottom diff");
  ExpectClose(a.weight_diff, b.weight_diff, "weight diff");
  ExpectClose(a.bias_diff, b.bias_diff, "bias diff");
}

class DnnlConvolutionTest : public ::testing::TestWithParam<ConvCase> {
 protected:
  void SetUp() override {
    if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  }
};

TEST_P(DnnlConvolutionTest, MatchesCremaKernels) {
  const ConvCase& c = GetParam();
  const LayerParameter param = ConvParam(c.param);
  const ConvResult crema = RunConv(param, c.shape, CpuEngine::kCaffe);
  const ConvResult dnnl = RunConv(param, c.shape, CpuEngine::kDnnl);
  for (const std::string& engine : crema.engines) EXPECT_EQ(engine, "crema");
  for (const std::string& engine : dnnl.engines) EXPECT_EQ(engine, "oneDNN");
  ExpectSameResults(dnnl, crema);
  // The param diffs accumulated two passes onto their start values.
  const ConvResult once = RunConv(param, c.shape, CpuEngine::kDnnl, 1);
  for (size_t i = 0; i < once.weight_diff.size(); ++i) {
    const double start = 1.0 + 0.01 * static_cast<double>(i % 97);
    ASSERT_NEAR(dnnl.weight_diff[i] - start, 2 * (once.weight_diff[i] - start),
                1e-4 * (1 + std::fabs(dnnl.weight_diff[i])))
        << "weight diff element " << i;
  }
}

TEST_P(DnnlConvolutionTest, AutoPicksAnEngineAndMatches) {
  const ConvCase& c = GetParam();
  const LayerParameter param = ConvParam(c.param);
  const ConvResult crema = RunConv(param, c.shape, CpuEngine::kCaffe, 12);
  const ConvResult automatic = RunConv(param, c.shape, CpuEngine::kAuto, 12);
  ExpectSameResults(automatic, crema);
  // The race runs crema's kernels, oneDNN's and, where the layer has it (3x3, stride 1, on
  // AVX-512), oneDNN's Winograd in turn, forward and backward each, for two or three passes of
  // each; then one is kept.
  const std::vector<std::string> names = {"crema", "oneDNN", "oneDNN-Winograd"};
  const size_t kernels = automatic.engines[4] == names[2] ? 3 : 2;
  for (size_t pass = 0; pass < 2 * kernels; ++pass) {
    EXPECT_EQ(automatic.engines[2 * pass], names[pass % kernels]) << "forward pass " << pass;
    EXPECT_EQ(automatic.engines[2 * pass + 1], names[pass % kernels]) << "backward pass " << pass;
  }
  const size_t kept = 2 * 3 * kernels;  // after the longest race
  for (size_t i = kept; i < automatic.engines.size(); ++i)
    EXPECT_EQ(automatic.engines[i], automatic.engines[i % 2 + kept]) << "the kept engine changed";
  EXPECT_NE(std::find(names.begin(), names.begin() + kernels, automatic.engines[kept]),
            names.begin() + kernels)
      << automatic.engines[kept];
}

TEST_P(DnnlConvolutionTest, PropagateDownFalseLeavesBottomDiff) {
  const ConvCase& c = GetParam();
  const ConvResult dnnl = RunConv(ConvParam(c.param), c.shape, CpuEngine::kDnnl, 1, false);
  for (size_t i = 0; i < dnnl.bottom_diff.size(); ++i)
    ASSERT_EQ(dnnl.bottom_diff[i], 42.0f + 0.01f * static_cast<float>(i % 97));
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, DnnlConvolutionTest,
    ::testing::Values(
        ConvCase{"basic", "num_output: 4 kernel_size: 3", {2, 3, 6, 5}},
        ConvCase{"stride_pad", "num_output: 3 kernel_size: 3 stride: 2 pad: 1", {2, 2, 7, 6}},
        ConvCase{"rectangular_no_bias",
                 "num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 "
                 "pad_w: 0 bias_term: false",
                 {2, 3, 7, 5}},
        ConvCase{"dilation", "num_output: 2 kernel_size: 3 dilation: 2 pad: 1", {1, 2, 8, 7}},
        ConvCase{"dilation_per_axis",
                 "num_output: 3 kernel_size: 3 dilation: 1 dilation: 3",
                 {2, 3, 9, 10}},
        ConvCase{"group", "num_output: 6 kernel_size: 3 group: 2 stride: 2", {2, 4, 7, 7}},
        ConvCase{"group_dilation_pad",
                 "num_output: 4 kernel_size: 3 group: 2 dilation: 2 pad: 2 stride: 2",
                 {1, 6, 6, 6}},
        ConvCase{"one_by_one", "num_output: 5 kernel_size: 1", {2, 3, 4, 5}},
        ConvCase{"one_by_one_group", "num_output: 4 kernel_size: 1 group: 2", {2, 4, 3, 3}},
        ConvCase{"one_by_one_stride", "num_output: 8 kernel_size: 1 stride: 2", {2, 16, 7, 7}},
        // One-element planes: the input's blocked layout is its plain bytes (no reorder), the
        // output's 24 channels pad a block of 16 (a reorder) but not of 8.
        ConvCase{"one_pixel_planes", "num_output: 24 kernel_size: 1", {2, 32, 1, 1}},
        ConvCase{"depthwise", "num_output: 4 kernel_size: 3 group: 4", {2, 4, 6, 5}},
        ConvCase{
            "depthwise_multiplier", "num_output: 6 kernel_size: 3 group: 3 pad: 1", {2, 3, 5, 6}},
        ConvCase{"odd_batch1", "num_output: 5 kernel_size: 5 stride: 3 pad: 2", {1, 5, 9, 11}},
        ConvCase{"channels_16_32", "num_output: 32 kernel_size: 3 pad: 1", {3, 16, 10, 10}},
        ConvCase{"channels_17_19", "num_output: 19 kernel_size: 3 stride: 2", {2, 17, 9, 9}},
        ConvCase{
            "large_kernel_pad", "num_output: 8 kernel_size: 5 pad: 2 group: 2", {2, 8, 12, 13}},
        ConvCase{"three_d",
                 "num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 stride: 2 "
                 "stride: 1 stride: 1 pad: 1",
                 {2, 2, 5, 4, 4}}),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

// The objective L = sum(top * r) is linear in the bottom, the weights and the bias, so central
// differences with a large step are exact up to float rounding: the gradients of oneDNN's
// backward against the changes of oneDNN's forward.
TEST(DnnlConvolutionGradient, NumericUnderPolicyDnnl) {
  if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  ScopedCpuEngine scoped(CpuEngine::kDnnl);
  SetRandomSeed(1701);
  ConvolutionLayer layer(
      ConvParam("num_output: 6 kernel_size: 3 group: 2 stride: 2 pad: 1 "
                "dilation: 2"));
  Blob bottom(std::vector<int>{2, 4, 9, 8}), top;
  FillGaussian(&bottom, 0, 1, 5);
  layer.SetUp({&bottom}, {&top});
  Blob r(top.shape());
  FillGaussian(&r, 0, 1, 6);
  const auto objective = [&] {
    layer.Forward({&bottom}, {&top});
    double sum = 0;
    for (int64_t i = 0; i < top.count(); ++i) sum += top.data_at(i) * r.data_at(i);
    return sum;
  };
  objective();
  std::memcpy(top.mutable_cpu_diff<float>(), r.cpu_data<float>(), r.count() * sizeof(float));
  for (const BlobPtr& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_STREQ(layer.cpu_engine(), "oneDNN");
  std::vector<Blob*> blobs = {&bottom, layer.blobs()[0].get(), layer.blobs()[1].get()};
  for (size_t b = 0; b < blobs.size(); ++b) {
    Blob* blob = blobs[b];
    const std::vector<float> analytic = Diff(*blob);
    for (int64_t i = 0; i < blob->count(); i += std::max<int64_t>(1, blob->count() / 40)) {
      float* data = blob->mutable_cpu_data<float>();
      const float saved = data[i];
      constexpr float kStep = 0.5f;
      data[i] = saved + kStep;
      const double plus = objective();
      data = blob->mutable_cpu_data<float>();
      data[i] = saved - kStep;
      const double minus = objective();
      blob->mutable_cpu_data<float>()[i] = saved;
      const double numeric = (plus - minus) / (2 * kStep);
      EXPECT_NEAR(analytic[i], numeric, 1e-3 * std::max(1.0, std::fabs(numeric)))
          << "blob " << b << " element " << i;
    }
  }
}

std::vector<float> Gaussian(size_t n, uint64_t seed) {
  Blob blob(std::vector<int>{static_cast<int>(n)});
  FillGaussian(&blob, 0, 1, seed);
  return Data(blob);
}

// oneDNN's Winograd convolution (3x3, stride 1) against its direct one: forward (plain, and with
// the fused ReLU and the sum post-ops, which it may hand to the direct one), backward data and
// weights (accumulated, and overwritten where the gradient was zeroed lazily), within float
// rounding, for training and for a forward-only layer; with groups (run group by group on the
// whole tensors) also on channel-blocked tensors. Other geometries have none.
TEST(DnnlConvolutionWinograd, MatchesTheDirectConvolution) {
  if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  const DnnlConvGeometry geometry{
      {2, 16, 12, 12}, {2, 32, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
  DnnlConvolution conv;
  ASSERT_TRUE(conv.Prepare(geometry));
  if (!conv.HasWinograd()) GTEST_SKIP() << "oneDNN has no Winograd convolution on this CPU";
  DnnlConvGeometry grouped = geometry;  // two groups of 16 channels in, 16 out
  grouped.input = {2, 32, 12, 12};
  grouped.group = 2;
  const float slope = 0.1f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Workspace ws;
  for (const DnnlConvGeometry& shape : {geometry, grouped}) {
    const int64_t xs = 2 * shape.input[1] * 144, ys = 2 * 32 * 144, ws_count = 32 * 16 * 9;
    const std::vector<float> x = Gaussian(xs, 1), w = Gaussian(ws_count, 2), bias = Gaussian(32, 3),
                             dy = Gaussian(ys, 4), start = Gaussian(ys, 5);
    // Training's primitives, then a forward-only layer's (oneDNN's inference Winograd, its
    // weights transformed once and kept; its backward, should one run, still works).
    for (const bool forward_only : {false, true}) {
      DnnlConvGeometry g = shape;
      g.forward_only = forward_only;
      ASSERT_TRUE(conv.Prepare(g));
      ASSERT_TRUE(conv.HasWinograd()) << "group " << g.group;
      const std::string what = StrCat("group ", g.group, forward_only ? " forward-only " : " ");
      const int blocks = g.group > 1 ? 2 : 1;  // plain, then (grouped) channel-blocked by 16
      for (int post = 0; post < 3; ++post) {   // none, ReLU, sum + ReLU
        for (int block = 0; block < blocks; ++block) {
          std::vector<float> y[2] = {start, start};
          for (int winograd = 0; winograd < 2; ++winograd) {
            DnnlConvolution::Io io;
            io.weights_generation = forward_only ? 1 : 0;
            io.relu = post > 0 ? &slope : nullptr;
            io.sum = post == 2;
            io.winograd = winograd == 1;
            io.src_block = io.dst_block = block * 16;
            conv.Forward(x.data(), w.data(), bias.data(), y[winograd].data(), &ws, io);
          }
          ExpectClose(y[1], y[0], StrCat(what, "forward, post-ops ", post, " block ", block));
        }
      }
      std::vector<float> dx[2], dw[2] = {w, w}, db[2] = {bias, bias};
      std::vector<float> dw_zeroed[2], db_zeroed[2];
      for (int winograd = 0; winograd < 2; ++winograd) {
        dx[winograd].assign(x.size(), 0.f);
        DnnlBackwardArgs args;
        args.x = x.data();
        args.dy = dy.data();
        args.w = w.data();
        args.dw = dw[winograd].data();
        args.db = db[winograd].data();
        args.dx = dx[winograd].data();
        conv.Backward(args, &ws, winograd == 1);
        // Overwritten: what accumulating into zeros gives (the NaNs are never read).
        dw_zeroed[winograd].assign(w.size(), nan);
        db_zeroed[winograd].assign(bias.size(), nan);
        args.dw = dw_zeroed[winograd].data();
        args.db = db_zeroed[winograd].data();
        args.dx = nullptr;
        args.overwrite_dw = args.overwrite_db = true;
        conv.Backward(args, &ws, winograd == 1);
        for (size_t i = 0; i < w.size(); ++i) dw_zeroed[winograd][i] += w[i];
        for (size_t i = 0; i < bias.size(); ++i) db_zeroed[winograd][i] += bias[i];
      }
      ExpectClose(dx[1], dx[0], what + "backward data");
      ExpectClose(dw[1], dw[0], what + "weight diff (accumulated)");
      ExpectClose(db[1], db[0], what + "bias diff (accumulated)");
      for (int winograd = 0; winograd < 2; ++winograd) {
        ExpectClose(dw_zeroed[winograd], dw[winograd], what + "weight diff (overwritten)");
        ExpectClose(db_zeroed[winograd], db[winograd], what + "bias diff (overwritten)");
      }
    }
  }
  ASSERT_TRUE(conv.Prepare(geometry));
  // The layer on this geometry races it as a third kernel.
  const LayerParameter param = ConvParam("num_output: 32 kernel_size: 3 pad: 1");
  const ConvResult automatic = RunConv(param, geometry.input, CpuEngine::kAuto, 12);
  EXPECT_EQ(automatic.engines[4], "oneDNN-Winograd");
  EXPECT_EQ(automatic.engines[5], "oneDNN-Winograd");
  ExpectSameResults(automatic, RunConv(param, geometry.input, CpuEngine::kCaffe, 12));
  DnnlConvGeometry strided = geometry, one_by_one = geometry, dilated = geometry;
  strided.stride = {2, 2};
  strided.output = {2, 32, 6, 6};
  one_by_one.filter = {32, 16, 1, 1};
  one_by_one.pad = {0, 0};
  dilated.dilation = {2, 2};
  dilated.pad = {2, 2};
  for (const DnnlConvGeometry& other : {strided, one_by_one, dilated}) {
    ASSERT_TRUE(conv.Prepare(other)) << ShapeText(other.filter);
    EXPECT_FALSE(conv.HasWinograd()) << ShapeText(other.filter);
  }
}

// `plain` (N, C, H, W) channel-blocked by `block` (oneDNN's nChw16c / nChw8c).
std::vector<float> Blocked(const std::vector<int>& shape, int block,
                           const std::vector<float>& plain) {
  const int64_t channels = shape[1], spatial = static_cast<int64_t>(shape[2]) * shape[3];
  std::vector<float> out(plain.size());
  for (int64_t n = 0; n < shape[0]; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < spatial; ++i)
        out[((n * (channels / block) + c / block) * spatial + i) * block + c % block] =
            plain[(n * channels + c) * spatial + i];
  return out;
}

// Both backward passes in one call (dy, plain, reordered once for the two; each pass's other
// buffers overlapping the other's in the workspace) give the bits of each pass alone, with dy
// plain or channel-blocked, through the direct and the Winograd primitives.
TEST(DnnlConvolutionBackward, BothPassesAtOnceGiveTheBitsOfEachAlone) {
  if (!DnnlBuilt() || ChannelBlock() == 0) GTEST_SKIP() << "no oneDNN with blocked layouts here";
  const DnnlConvGeometry geometry{
      {2, 16, 12, 12}, {2, 32, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
  DnnlConvolution conv;
  ASSERT_TRUE(conv.Prepare(geometry));
  const std::vector<float> x = Gaussian(2 * 16 * 144, 1), w = Gaussian(32 * 16 * 9, 2),
                           dy = Gaussian(2 * 32 * 144, 3), bias = Gaussian(32, 4);
  Workspace ws;
  for (const bool winograd : {false, true}) {
    if (winograd && !conv.HasWinograd()) continue;
    for (const int block : {0, ChannelBlock()}) {
      // Blocked: x and dy as the net holds them in a channel-blocked chain (dx follows x).
      std::vector<float> x_in = x, dy_in = dy;
      if (block > 0) {
        x_in = Blocked({2, 16, 12, 12}, block, x);
        dy_in = Blocked({2, 32, 12, 12}, block, dy);
      }
      std::vector<float> dw[2] = {w, w}, db[2] = {bias, bias}, dx[2];
      for (int together = 0; together < 2; ++together) {
        dx[together].assign(x.size(), 0.f);
        DnnlBackwardArgs args;
        args.x = x_in.data();
        args.dy = dy_in.data();
        args.w = w.data();
        args.src_block = args.dst_block = block;
        args.dw = dw[together].data();
        args.db = db[together].data();
        if (together == 0) {
          conv.Backward(args, &ws, winograd);
          args.dw = args.db = nullptr;
        }
        args.dx = dx[together].data();
        conv.Backward(args, &ws, winograd);
      }
      const std::string what = StrCat(winograd ? "Winograd" : "direct", ", block ", block);
      EXPECT_EQ(dx[1], dx[0]) << what;
      EXPECT_EQ(dw[1], dw[0]) << what;
      EXPECT_EQ(db[1], db[0]) << what;
      EXPECT_NE(dx[1], std::vector<float>(x.size(), 0.f)) << what;
    }
  }
}

// A forward-only layer keeps its weights in oneDNN's layout between passes; writing the weights
// (mutable_cpu_data, or a pointer taken earlier plus MarkWritten, or new data shared in) makes
// the next pass use the new ones.
TEST(DnnlConvolutionWeightCache, ForwardOnlyFollowsWrittenWeights) {
  if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  const LayerParameter param = ConvParam("num_output: 32 kernel_size: 3 pad: 1");
  const std::vector<int> shape = {1, 16, 9, 9};
  // The reference: crema's kernels on the same weights.
  const auto expected = [&](ConvolutionLayer& layer, const Blob& bottom) {
    ScopedCpuEngine caffe(CpuEngine::kCaffe);
    Blob top;
    ConvolutionLayer reference(param);
    reference.SetUp({const_cast<Blob*>(&bottom)}, {&top});
    for (size_t i = 0; i < layer.blobs().size(); ++i)
      reference.blobs()[i]->CopyFrom(*layer.blobs()[i]);
    reference.Forward({const_cast<Blob*>(&bottom)}, {&top});
    return Data(top);
  };
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  SetRandomSeed(1701);
  ConvolutionLayer layer(param);
  layer.set_forward_only(true);
  Blob bottom(shape), top;
  FillGaussian(&bottom, 0, 1, 11);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  ASSERT_STREQ(layer.cpu_engine(), "oneDNN");
  const std::vector<float> first = Data(top);
  ExpectClose(first, expected(layer, bottom), "first pass");
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(Data(top), first);  // the kept weights
  // Written through mutable_cpu_data.
  Blob& weights = *layer.blobs()[0];
  float* w = weights.mutable_cpu_data<float>();
  for (int64_t i = 0; i < weights.count(); ++i) w[i] *= -0.5f;
  layer.Forward({&bottom}, {&top});
  ExpectClose(Data(top), expected(layer, bottom), "after mutable_cpu_data");
  EXPECT_NE(Data(top), first);
  // Through the same pointer again, announced with MarkWritten.
  const std::vector<float> second = Data(top);
  for (int64_t i = 0; i < weights.count(); ++i) w[i] += 0.25f;
  weights.data()->MarkWritten();
  layer.Forward({&bottom}, {&top});
  ExpectClose(Data(top), expected(layer, bottom), "after MarkWritten");
  EXPECT_NE(Data(top), second);
  // Other weights shared in (another buffer).
  Blob other(weights.shape());
  FillGaussian(&other, 0, 1, 23);
  weights.ShareData(other);
  layer.Forward({&bottom}, {&top});
  ExpectClose(Data(top), expected(layer, bottom), "after ShareData");
}

// Geometries oneDNN does not take (1-D, a kernel larger than the padded input, channel axis 2),
// float64 and deterministic mode run crema's kernels under policy dnnl; `engine: CAFFE` (Caffe's
// cuDNN choice) runs oneDNN.
TEST(DnnlConvolutionFallback, CremaKernelsWhereOneDnnDoesNotApply) {
  if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  const std::vector<ConvCase> cases = {
      {"one_d", "num_output: 3 kernel_size: 3 stride: 2", {2, 2, 9}},
      {"kernel_larger_than_input", "num_output: 2 kernel_size: 5 stride: 2", {1, 2, 4, 4}},
      {"axis2", "num_output: 3 kernel_size: 2 axis: 2", {2, 2, 3, 5, 4}}};
  for (const ConvCase& c : cases) {
    const ConvResult crema = RunConv(ConvParam(c.param), c.shape, CpuEngine::kCaffe);
    const ConvResult dnnl = RunConv(ConvParam(c.param), c.shape, CpuEngine::kDnnl);
    for (const std::string& engine : dnnl.engines) EXPECT_EQ(engine, "crema") << c.name;
    // The same kernels: the same bits.
    EXPECT_EQ(dnnl.top, crema.top) << c.name;
    EXPECT_EQ(dnnl.weight_diff, crema.weight_diff) << c.name;
  }
  for (const std::string& engine : RunConv(ConvParam("num_output: 4 kernel_size: 3 engine: CAFFE"),
                                           {2, 3, 6, 5}, CpuEngine::kDnnl)
                                       .engines)
    EXPECT_EQ(engine, "oneDNN") << "engine: CAFFE";
  {
    ScopedCpuEngine scoped(CpuEngine::kDnnl);
    ConvolutionLayer layer(ConvParam("num_output: 2 kernel_size: 3"));
    layer.set_dtype(DataType::kFloat64);
    Blob bottom(std::vector<int>{1, 2, 5, 5}, DataType::kFloat64), top(DataType::kFloat64);
    FillGaussian(&bottom, 0, 1);
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    EXPECT_STREQ(layer.cpu_engine(), "crema");
  }
  {
    gpu::SetDeterministic(true);
    const ConvResult dnnl =
        RunConv(ConvParam("num_output: 4 kernel_size: 3"), {2, 3, 6, 5}, CpuEngine::kDnnl);
    gpu::SetDeterministic(false);
    for (const std::string& engine : dnnl.engines) EXPECT_EQ(engine, "crema");
  }
}

TEST(DnnlConvolutionPolicy, ParseNamesAndErrors) {
  EXPECT_EQ(ParseCpuEngine("auto", "--cpu_engine"), CpuEngine::kAuto);
  EXPECT_EQ(ParseCpuEngine("caffe", "--cpu_engine"), CpuEngine::kCaffe);
  EXPECT_EQ(ParseCpuEngine("dnnl", "--cpu_engine"), CpuEngine::kDnnl);
  EXPECT_STREQ(CpuEngineName(CpuEngine::kDnnl), "dnnl");
  try {
    ParseCpuEngine("onednn", "--cpu_engine");
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(
        std::string(e.what()).find("--cpu_engine must be auto, caffe or dnnl, got \"onednn\""),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace crema
