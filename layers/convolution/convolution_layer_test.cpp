#include "layers/convolution/convolution_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_context.hpp"
#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "layers/convolution/depthwise_conv.hpp"
#include "math/cpu_isa.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using testing::CheckGradient;
using testing::FillGaussian;
using testing::FillUniform;
using testing::ParseLayerParam;

constexpr const char* kFillers =
    " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";

std::string Conv(const std::string& body, bool fillers = true) {
  return "convolution_param { " + body + (fillers ? kFillers : "") + " }";
}

}  // namespace
}  // namespace crema

CREMA_LAYER_CONFORMANCE(
    Convolution,
    LayerCase(crema::Conv("num_output: 4 kernel_size: 3"), {{2, 3, 6, 5}}).Name("basic"),
    LayerCase(crema::Conv("num_output: 2 kernel_size: 3"), {{2, 3, 5, 5}, {2, 3, 5, 5}})
        .Tops(2)
        .Name("two_bottoms"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 3 stride: 2 pad: 1"), {{2, 2, 7, 6}})
        .Name("stride_pad"),
    LayerCase(crema::Conv("num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 "
                          "pad_h: 1 pad_w: 0 bias_term: false"),
              {{2, 3, 7, 5}})
        .Name("rectangular_no_bias"),
    LayerCase(crema::Conv("num_output: 2 kernel_size: 3 dilation: 2 pad: 1"), {{1, 2, 8, 7}})
        .Name("dilation"),
    LayerCase(crema::Conv("num_output: 6 kernel_size: 3 group: 2 stride: 2"), {{2, 4, 7, 7}})
        .Name("group"),
    LayerCase(crema::Conv("num_output: 4 kernel_size: 3 group: 2 dilation: 2 pad: 2 stride: 2"),
              {{1, 6, 6, 6}})
        .Name("group_dilation_pad"),
    LayerCase(crema::Conv("num_output: 5 kernel_size: 1"), {{2, 3, 4, 5}}).Name("one_by_one"),
    LayerCase(crema::Conv("num_output: 4 kernel_size: 1 group: 2"), {{2, 4, 3, 3}})
        .Name("one_by_one_group"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 "
                          "stride: 2 stride: 1 stride: 1 pad: 1"),
              {{2, 2, 5, 4, 4}})
        .Name("three_d"),
    LayerCase(crema::Conv("num_output: 2 kernel_size: 3 dilation: 1 dilation: 2 force_nd_im2col: "
                          "true pad: 1 stride: 2"),
              {{2, 2, 6, 7}})
        .Name("force_nd"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 3 stride: 2"), {{2, 2, 9}}).Name("one_d"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 2 axis: 2"), {{2, 2, 3, 5, 4}}).Name("axis2"),
    // Depthwise (group == channels): the direct loops of depthwise_conv.cpp.
    LayerCase(crema::Conv("num_output: 4 kernel_size: 3 group: 4"), {{2, 4, 6, 5}})
        .Name("depthwise"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 3 group: 3 stride: 2 pad: 1"), {{2, 3, 7, 6}})
        .Name("depthwise_stride_pad"),
    LayerCase(crema::Conv("num_output: 2 kernel_size: 3 group: 2 dilation: 2 pad: 2"),
              {{1, 2, 7, 8}})
        .Name("depthwise_dilation"),
    LayerCase(crema::Conv("num_output: 3 kernel_h: 3 kernel_w: 2 group: 3 stride_h: 1 stride_w: 2 "
                          "pad_h: 2 pad_w: 1 bias_term: false"),
              {{2, 3, 5, 6}})
        .Name("depthwise_rect_no_bias"),
    LayerCase(crema::Conv("num_output: 6 kernel_size: 3 group: 3 pad: 1"), {{2, 3, 5, 4}})
        .Name("depthwise_multiplier2"),
    LayerCase(crema::Conv("num_output: 4 kernel_size: 5 group: 2 pad: 2 stride: 3 dilation: 2"),
              {{1, 2, 4, 3}})
        .Name("depthwise_kernel_wider_than_input"),
    LayerCase(crema::Conv("num_output: 3 kernel_size: 3 group: 3 axis: 2"), {{2, 2, 3, 5, 4}})
        .Name("depthwise_axis2"));

namespace crema {
namespace {

// Convolution by definition, in double, for any number of spatial axes: top[n][o][y] =
// bias[o] + sum over c in o's group, kernel offsets k: w[o][c'][k] * x[n][c][y * s - p + k * d].
std::vector<double> NaiveConv(const Blob& bottom, const Blob& weight, const Blob* bias,
                              int num_output, int group, const std::vector<int>& pad,
                              const std::vector<int>& stride, const std::vector<int>& dilation,
                              std::vector<int>* top_shape) {
  const int axes = bottom.num_axes() - 2;
  const int num = bottom.shape(0);
  const int channels = bottom.shape(1);
  std::vector<int> in(axes), kernel(axes), out(axes);
  int64_t in_volume = 1, kernel_volume = 1, out_volume = 1;
  for (int i = 0; i < axes; ++i) {
    in[i] = bottom.shape(2 + i);
    kernel[i] = weight.shape(2 + i);
    out[i] = (in[i] + 2 * pad[i] - (dilation[i] * (kernel[i] - 1) + 1)) / stride[i] + 1;
    in_volume *= in[i];
    kernel_volume *= kernel[i];
    out_volume *= out[i];
  }
  *top_shape = {num, num_output};
  top_shape->insert(top_shape->end(), out.begin(), out.end());
  const int in_per_group = channels / group;
  const int out_per_group = num_output / group;
  std::vector<double> top(static_cast<size_t>(num) * num_output * out_volume, 0.0);
  std::vector<int> y(axes), k(axes);
  for (int n = 0; n < num; ++n) {
    for (int o = 0; o < num_output; ++o) {
      const int g = o / out_per_group;
      for (int64_t yi = 0; yi < out_volume; ++yi) {
        int64_t rest = yi;
        for (int a = axes - 1; a >= 0; --a) {
          y[a] = static_cast<int>(rest % out[a]);
          rest /= out[a];
        }
        double sum = bias ? bias->data_at(o) : 0.0;
        for (int ci = 0; ci < in_per_group; ++ci) {
          const int c = g * in_per_group + ci;
          for (int64_t ki = 0; ki < kernel_volume; ++ki) {
            int64_t krest = ki;
            for (int a = axes - 1; a >= 0; --a) {
              k[a] = static_cast<int>(krest % kernel[a]);
              krest /= kernel[a];
            }
            int64_t index = static_cast<int64_t>(n) * channels + c;
            bool inside = true;
            for (int a = 0; a < axes; ++a) {
              const int x = y[a] * stride[a] - pad[a] + k[a] * dilation[a];
              inside = inside && x >= 0 && x < in[a];
              index = index * in[a] + x;
            }
            if (!inside) continue;
            const int64_t w_index =
                (static_cast<int64_t>(o) * in_per_group + ci) * kernel_volume + ki;
            sum += weight.data_at(w_index) * bottom.data_at(index);
          }
        }
        top[(static_cast<size_t>(n) * num_output + o) * out_volume + yi] = sum;
      }
    }
  }
  return top;
}

struct NaiveCase {
  std::string param;  // convolution_param body
  std::vector<int> bottom_shape;
  int num_output;
  int group;
  std::vector<int> pad, stride, dilation;  // per spatial axis
  bool bias;
};
void PrintTo(const NaiveCase& c, std::ostream* os) { *os << c.param; }

class ConvolutionNaiveTest : public ::testing::TestWithParam<NaiveCase> {};

TEST_P(ConvolutionNaiveTest, ForwardMatchesDirectLoops) {
  const NaiveCase& c = GetParam();
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    LayerParameter param = ParseLayerParam("name: 'conv' type: 'Convolution' " + Conv(c.param));
    ConvolutionLayer layer(param);
    layer.set_dtype(dtype);
    Blob bottom(c.bottom_shape, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    std::vector<int> expected_shape;
    const std::vector<double> expected =
        NaiveConv(bottom, *layer.blobs()[0], c.bias ? layer.blobs()[1].get() : nullptr,
                  c.num_output, c.group, c.pad, c.stride, c.dilation, &expected_shape);
    ASSERT_EQ(top.shape(), expected_shape);
    ASSERT_EQ(layer.blobs().size(), c.bias ? 2u : 1u);
    const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
    for (int64_t i = 0; i < top.count(); ++i)
      ASSERT_NEAR(top.data_at(i), expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
          << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ConvolutionNaiveTest,
    ::testing::Values(
        NaiveCase{"num_output: 4 kernel_size: 3", {2, 3, 6, 5}, 4, 1, {0, 0}, {1, 1}, {1, 1}, true},
        NaiveCase{"num_output: 3 kernel_size: 3 stride: 2 pad: 1",
                  {2, 2, 7, 6},
                  3,
                  1,
                  {1, 1},
                  {2, 2},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 "
                  "pad_w: 0 bias_term: false",
                  {2, 3, 7, 5},
                  3,
                  1,
                  {1, 0},
                  {2, 1},
                  {1, 1},
                  false},
        NaiveCase{"num_output: 4 kernel_size: 3 group: 2 dilation: 2 pad: 2 stride: 2",
                  {2, 6, 8, 8},
                  4,
                  2,
                  {2, 2},
                  {2, 2},
                  {2, 2},
                  true},
        NaiveCase{"num_output: 2 kernel_size: 3 kernel_size: 2 dilation: 1 dilation: 2 "
                  "stride: 1 stride: 2 pad: 0 pad: 1",
                  {2, 3, 7, 8},
                  2,
                  1,
                  {0, 1},
                  {1, 2},
                  {1, 2},
                  true},
        NaiveCase{"num_output: 6 kernel_size: 1 group: 3",
                  {2, 6, 3, 4},
                  6,
                  3,
                  {0, 0},
                  {1, 1},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 2 kernel_size: 1 stride: 2",
                  {1, 3, 5, 5},
                  2,
                  1,
                  {0, 0},
                  {2, 2},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 stride: 2 "
                  "pad: 1 dilation: 1 dilation: 1 dilation: 2",
                  {2, 2, 5, 4, 6},
                  3,
                  1,
                  {1, 1, 1},
                  {2, 2, 2},
                  {1, 1, 2},
                  true},
        NaiveCase{"num_output: 2 kernel_size: 3 force_nd_im2col: true pad: 1 stride: 2 dilation: 2",
                  {1, 2, 7, 6},
                  2,
                  1,
                  {1, 1},
                  {2, 2},
                  {2, 2},
                  true},
        NaiveCase{
            "num_output: 3 kernel_size: 4 stride: 3 pad: 2", {2, 2, 11}, 3, 1, {2}, {3}, {1}, true},
        NaiveCase{"num_output: 4 kernel_size: 3 group: 4 stride: 2 pad: 1",
                  {2, 4, 7, 6},
                  4,
                  4,
                  {1, 1},
                  {2, 2},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 6 kernel_h: 3 kernel_w: 2 group: 3 dilation: 2 pad_h: 2 pad_w: 1 "
                  "bias_term: false",
                  {2, 3, 6, 7},
                  6,
                  3,
                  {2, 1},
                  {1, 1},
                  {2, 2},
                  false},
        // An input slightly smaller than the kernel still gives one output (C++ truncation).
        NaiveCase{"num_output: 2 kernel_size: 3 stride: 2",
                  {1, 1, 2, 2},
                  2,
                  1,
                  {0, 0},
                  {2, 2},
                  {1, 1},
                  true}));

// ---- depthwise fast path vs im2col + GEMM ----

// Restores the process-wide switch when a test ends.
struct DepthwiseSwitch {
  explicit DepthwiseSwitch(bool enabled) { SetDepthwiseConvEnabled(enabled); }
  ~DepthwiseSwitch() { SetDepthwiseConvEnabled(true); }
};

struct ConvRun {
  std::vector<double> top, bottom_diff, weight_diff, bias_diff;
};

// Forward and backward of one layer; the same seeds give the same weights and data either way.
// With `weights`: an empty one receives the layer's filled weights, a filled one replaces them
// (the same values in another data type).
ConvRun RunConv(const std::string& body, const std::vector<int>& shape, DataType dtype,
                bool depthwise, const Device& device = Device::Cpu(),
                std::vector<std::vector<double>>* weights = nullptr) {
  DepthwiseSwitch guard(depthwise);
  LayerParameter param = ParseLayerParam("type: 'Convolution' " + Conv(body));
  ConvolutionLayer layer(param);
  layer.set_dtype(dtype);
  layer.set_device(device);
  Blob bottom(shape, dtype), top(dtype);
  FillUniform(&bottom, -1, 1);
  SetRandomSeed(1701);  // the same filled weights in both runs
  layer.SetUp({&bottom}, {&top});
  if (weights != nullptr && weights->empty()) {
    for (auto& blob : layer.blobs()) {
      weights->emplace_back();
      for (int64_t i = 0; i < blob->count(); ++i) weights->back().push_back(blob->data_at(i));
    }
  } else if (weights != nullptr) {
    for (size_t b = 0; b < layer.blobs().size(); ++b)
      CREMA_DISPATCH_FLOAT(dtype, T, {
        for (int64_t i = 0; i < layer.blobs()[b]->count(); ++i)
          layer.blobs()[b]->mutable_cpu_data<T>()[i] = static_cast<T>((*weights)[b][i]);
      });
  }
  layer.Forward({&bottom}, {&top});
  Blob noise(top.shape(), dtype);
  FillUniform(&noise, -1, 1, 77);
  for (int64_t i = 0; i < top.count(); ++i) {
    if (dtype == DataType::kFloat64)
      top.mutable_cpu_diff<double>()[i] = noise.data_at(i);
    else
      top.mutable_cpu_diff<float>()[i] = static_cast<float>(noise.data_at(i));
  }
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  ConvRun run;
  for (int64_t i = 0; i < top.count(); ++i) run.top.push_back(top.data_at(i));
  for (int64_t i = 0; i < bottom.count(); ++i) run.bottom_diff.push_back(bottom.diff_at(i));
  for (int64_t i = 0; i < layer.blobs()[0]->count(); ++i)
    run.weight_diff.push_back(layer.blobs()[0]->diff_at(i));
  if (layer.blobs().size() > 1)
    for (int64_t i = 0; i < layer.blobs()[1]->count(); ++i)
      run.bias_diff.push_back(layer.blobs()[1]->diff_at(i));
  return run;
}

void ExpectAllNear(const std::vector<double>& fast, const std::vector<double>& generic,
                   double tolerance, const char* what) {
  ASSERT_EQ(fast.size(), generic.size()) << what;
  double scale = 1.0;
  for (double v : generic) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < fast.size(); ++i)
    ASSERT_NEAR(fast[i], generic[i], tolerance * scale) << what << " at " << i;
}

// The depthwise path against im2col + GEMM on one layer, in double and float.
void ExpectFastPathMatchesIm2colGemm(const std::string& body, const std::vector<int>& shape) {
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 2e-5;
    const ConvRun fast = RunConv(body, shape, dtype, true);
    const ConvRun generic = RunConv(body, shape, dtype, false);
    ExpectAllNear(fast.top, generic.top, tolerance, "top");
    ExpectAllNear(fast.bottom_diff, generic.bottom_diff, tolerance, "bottom diff");
    ExpectAllNear(fast.weight_diff, generic.weight_diff, tolerance, "weight diff");
    ExpectAllNear(fast.bias_diff, generic.bias_diff, tolerance, "bias diff");
    // The runs differ from an unrelated one: the comparison can fail.
    EXPECT_GT(std::abs(fast.top[0] - fast.top[1]) + std::abs(fast.weight_diff[0]), 0.0);
  }
}

TEST(ConvolutionDepthwise, FastPathMatchesIm2colGemm) {
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"num_output: 8 kernel_size: 3 group: 8 pad: 1", {2, 8, 9, 7}},
      {"num_output: 5 kernel_size: 3 group: 5 stride: 2", {3, 5, 8, 9}},
      {"num_output: 4 kernel_size: 3 group: 4 dilation: 2 pad: 2 stride: 2", {2, 4, 10, 11}},
      {"num_output: 3 kernel_h: 5 kernel_w: 3 group: 3 stride_h: 3 stride_w: 1 pad_h: 2 "
       "pad_w: 0 bias_term: false",
       {2, 3, 9, 6}},
      {"num_output: 12 kernel_size: 3 group: 4 pad: 1 stride: 2", {2, 4, 7, 7}},
      {"num_output: 2 kernel_size: 3 group: 2 pad: 3 dilation: 2", {1, 2, 3, 4}},
      {"num_output: 6 kernel_size: 1 group: 6 stride: 2", {2, 6, 5, 5}},
      // Large enough for the OpenMP branches.
      {"num_output: 32 kernel_size: 3 group: 32 pad: 1", {2, 32, 28, 28}},
  };
  for (const auto& [body, shape] : cases) {
    SCOPED_TRACE(body);
    LayerParameter param = ParseLayerParam("type: 'Convolution' " + Conv(body));
    const ConvolutionParameter& p = param.convolution_param();
    ASSERT_TRUE(UseDepthwiseConv(2, shape[1], static_cast<int>(p.group()),
                                 static_cast<int>(p.num_output()), false));
    ExpectFastPathMatchesIm2colGemm(body, shape);
  }
}

// 3x3 depthwise layers (stride 1 or 2, any pad) go through padded planes compiled once per
// instruction set: each level this CPU has matches im2col + GEMM, and the fused ReLU is the
// ReLU of the plain output.
TEST(ConvolutionDepthwise, ThreeByThreePlanesOnEveryInstructionSet) {
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"num_output: 6 kernel_size: 3 group: 6 pad: 1", {2, 6, 14, 14}},
      {"num_output: 6 kernel_size: 3 group: 6 pad: 1", {1, 6, 1, 1}},
      {"num_output: 4 kernel_size: 3 group: 4", {2, 4, 7, 19}},
      {"num_output: 4 kernel_size: 3 group: 4 pad: 2", {1, 4, 5, 6}},
      {"num_output: 5 kernel_size: 3 group: 5 pad: 1 stride: 2", {2, 5, 14, 14}},
      {"num_output: 5 kernel_size: 3 group: 5 pad: 1 stride: 2", {2, 5, 7, 9}},
      {"num_output: 3 kernel_size: 3 group: 3 stride: 2 bias_term: false", {1, 3, 8, 11}},
      {"num_output: 3 kernel_size: 3 group: 3 pad: 3 stride: 2", {1, 3, 4, 5}},
      {"num_output: 8 kernel_size: 3 group: 4 pad: 1", {2, 4, 9, 33}},
      {"num_output: 64 kernel_size: 3 group: 64 pad: 1 stride: 2", {1, 64, 28, 28}},
  };
  const ScopedCpuIsaLimit restore(CpuIsa::kAvx512);
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2Fma, CpuIsa::kAvx512}) {
    SetCpuIsaLimit(isa);
    if (CpuIsaLevel() != isa) continue;  // not on this CPU
    SCOPED_TRACE(CpuIsaName(isa));
    for (const auto& [body, shape] : cases) {
      SCOPED_TRACE(body + " on " + Blob(shape).shape_string());
      ExpectFastPathMatchesIm2colGemm(body, shape);
      // The fused ReLU (negative slope 0.25) on the same plane.
      LayerParameter param = ParseLayerParam("type: 'Convolution' " + Conv(body));
      ConvolutionLayer layer(param);
      Blob bottom(shape), plain, fused;
      FillUniform(&bottom, -1, 1);
      layer.SetUp({&bottom}, {&plain});
      layer.Forward({&bottom}, {&plain});
      layer.Reshape({&bottom}, {&fused});
      layer.set_fused_relu(true, 0.25f);
      layer.Forward({&bottom}, {&fused});
      for (int64_t i = 0; i < plain.count(); ++i) {
        const float x = plain.cpu_data<float>()[i];
        ASSERT_EQ(fused.cpu_data<float>()[i], std::max(x, 0.f) + 0.25f * std::min(x, 0.f)) << i;
      }
    }
  }
}

// On the GPU, depthwise geometries run crema's direct kernels (always in deterministic mode) or
// cuDNN's grouped convolution (the switch off), or whichever is faster per direction (timed on
// first use, without disturbing the accumulated weight gradient): all three match the CPU.
TEST(ConvolutionDepthwise, GpuDirectKernelsAndCudnnMatchTheCpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"num_output: 8 kernel_size: 3 group: 8 pad: 1", {2, 8, 9, 7}},
      {"num_output: 5 kernel_size: 3 group: 5 stride: 2 pad: 1", {3, 5, 8, 9}},
      {"num_output: 4 kernel_size: 3 group: 4 dilation: 2 pad: 2 stride: 2", {2, 4, 10, 11}},
      {"num_output: 3 kernel_h: 5 kernel_w: 3 group: 3 stride_h: 3 stride_w: 1 pad_h: 2 "
       "pad_w: 0 bias_term: false",
       {2, 3, 9, 6}},
      {"num_output: 12 kernel_size: 3 group: 4 pad: 1 stride: 2", {2, 4, 7, 7}},
      {"num_output: 32 kernel_size: 3 group: 32 pad: 1", {4, 32, 28, 28}},
  };
  for (const auto& [body, shape] : cases) {
    SCOPED_TRACE(body);
    for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
      SCOPED_TRACE(DataTypeName(dtype));
      const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 2e-5;
      const ConvRun cpu = RunConv(body, shape, dtype, true);
      gpu::SetDeterministic(true);
      const ConvRun direct = RunConv(body, shape, dtype, true, Device::Cuda(0));
      gpu::SetDeterministic(false);
      const ConvRun cudnn = RunConv(body, shape, dtype, false, Device::Cuda(0));
      const ConvRun timed = RunConv(body, shape, dtype, true, Device::Cuda(0));
      for (const auto& [name, run] : {std::pair<const char*, const ConvRun*>{"direct", &direct},
                                      {"cuDNN", &cudnn},
                                      {"timed", &timed}}) {
        SCOPED_TRACE(name);
        ExpectAllNear(run->top, cpu.top, tolerance, "top");
        ExpectAllNear(run->bottom_diff, cpu.bottom_diff, tolerance, "bottom diff");
        ExpectAllNear(run->weight_diff, cpu.weight_diff, tolerance, "weight diff");
        ExpectAllNear(run->bias_diff, cpu.bias_diff, tolerance, "bias diff");
      }
    }
  }
}

TEST(ConvolutionDepthwise, OnlyDepthwiseGeometriesTakeTheFastPath) {
  EXPECT_TRUE(UseDepthwiseConv(2, 32, 32, 32, false));
  EXPECT_TRUE(UseDepthwiseConv(2, 32, 32, 64, false));   // channel multiplier 2
  EXPECT_FALSE(UseDepthwiseConv(2, 32, 16, 32, false));  // grouped, not depthwise
  EXPECT_FALSE(UseDepthwiseConv(2, 32, 1, 32, false));
  EXPECT_FALSE(UseDepthwiseConv(3, 8, 8, 8, false));  // 3-D
  EXPECT_FALSE(UseDepthwiseConv(1, 8, 8, 8, false));  // 1-D
  EXPECT_FALSE(UseDepthwiseConv(2, 8, 8, 8, true));   // force_nd_im2col asks for im2col
  DepthwiseSwitch off(false);
  EXPECT_FALSE(UseDepthwiseConv(2, 8, 8, 8, false));
}

TEST(ConvolutionDepthwise, ByHand) {
  // One channel, 3x3 input, 2x2 kernel, pad 1, stride 2: outputs read the corners.
  LayerParameter param = ParseLayerParam(
      "type: 'Convolution' convolution_param { num_output: 2 group: 2 kernel_size: 2 pad: 1 "
      "stride: 2 }");
  BlobProto* weights = param.add_blobs();
  for (int d : {2, 1, 2, 2}) weights->mutable_shape()->add_dim(d);
  for (float w : {1.f, 2.f, 3.f, 4.f, 0.f, 0.f, 0.f, -1.f}) weights->add_data(w);
  BlobProto* bias = param.add_blobs();
  bias->mutable_shape()->add_dim(2);
  bias->add_data(0.5f);
  bias->add_data(0.f);
  ConvolutionLayer layer(param);
  layer.set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{1, 2, 3, 3}, DataType::kFloat64), top(DataType::kFloat64);
  for (int i = 0; i < 18; ++i) bottom.mutable_cpu_data<double>()[i] = i + 1;
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (std::vector<int>{1, 2, 2, 2}));
  // Channel 0 (x = 1..9): top(0,0) = 4 * x(0,0) + 0.5; top(0,1) = 3 * x(0,1) + 4 * x(0,2) + 0.5;
  // top(1,0) = 2 * x(1,0) + 4 * x(2,0) + 0.5; top(1,1) = x(1,1) + 2 x(1,2) + 3 x(2,1) + 4 x(2,2).
  // Channel 1 (x = 10..18): -x at (2 y, 2 x).
  const std::vector<double> expected = {
      4.5, 3 * 2 + 4 * 3 + 0.5, 2 * 4 + 4 * 7 + 0.5, 5 + 2 * 6 + 3 * 8 + 4 * 9 + 0.5, -10, -12, -16,
      -18};
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(top.data_at(i), expected[i]) << i;
}

std::vector<int> OutputShape(const std::string& body, const std::vector<int>& bottom_shape) {
  LayerParameter param = ParseLayerParam("type: 'Convolution' " + Conv(body));
  ConvolutionLayer layer(param);
  Blob bottom(bottom_shape), top;
  layer.SetUp({&bottom}, {&top});
  return top.shape();
}

TEST(ConvolutionShape, CaffeOutputSizes) {
  EXPECT_EQ(OutputShape("num_output: 8 kernel_size: 5", {64, 1, 28, 28}),
            (std::vector<int>{64, 8, 24, 24}));
  // AlexNet conv1: (227 - 11) / 4 + 1 = 55.
  EXPECT_EQ(OutputShape("num_output: 96 kernel_size: 11 stride: 4", {1, 3, 227, 227}),
            (std::vector<int>{1, 96, 55, 55}));
  // (8 + 2 - 3) / 2 + 1 = 4 (floor).
  EXPECT_EQ(OutputShape("num_output: 2 kernel_size: 3 stride: 2 pad: 1", {1, 1, 8, 9}),
            (std::vector<int>{1, 2, 4, 5}));
  // Dilation 2: kernel extent 5.
  EXPECT_EQ(OutputShape("num_output: 2 kernel_size: 3 dilation: 2", {1, 1, 9, 7}),
            (std::vector<int>{1, 2, 5, 3}));
  EXPECT_EQ(OutputShape("num_output: 2 kernel_h: 3 kernel_w: 1 pad_w: 2", {3, 1, 5, 5}),
            (std::vector<int>{3, 2, 3, 9}));
  EXPECT_EQ(
      OutputShape("num_output: 2 kernel_size: 2 kernel_size: 3 kernel_size: 1", {1, 1, 4, 4, 4}),
      (std::vector<int>{1, 2, 3, 2, 4}));
  // Axis 2: axes 0-1 are batch-like.
  EXPECT_EQ(OutputShape("num_output: 7 kernel_size: 3 axis: 2", {2, 3, 4, 5, 6}),
            (std::vector<int>{2, 3, 7, 3, 4}));
  EXPECT_EQ(OutputShape("num_output: 7 kernel_size: 3 axis: -3", {2, 3, 4, 5, 6}),
            (std::vector<int>{2, 3, 7, 3, 4}));
}

TEST(ConvolutionShape, ParamShapes) {
  LayerParameter param = ParseLayerParam("type: 'Convolution' " +
                                         Conv("num_output: 6 kernel_h: 3 kernel_w: 2 group: 3"));
  ConvolutionLayer layer(param);
  Blob bottom(std::vector<int>{2, 9, 5, 5}), top;
  layer.SetUp({&bottom}, {&top});
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{6, 3, 3, 2}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{6}));
}

// A window that is the whole input (one output position) runs in float as an inner product over
// the batch (cpu::GemmFewRows and its backward); double keeps im2col + GEMM: the two agree.
TEST(ConvolutionCoversInput, FloatInnerProductPathMatchesDoubleIm2col) {
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"num_output: 6 kernel_h: 3 kernel_w: 2", {5, 4, 3, 2}},
      {"num_output: 3 kernel_size: 2 bias_term: false", {2, 3, 2, 2}},
      {"num_output: 2 kernel_size: 2", {3, 2, 2, 2, 2}},
      {"num_output: 7 kernel_size: 1", {70, 9, 1, 1}},  // above the few-rows kernel's batch
  };
  for (const auto& [body, shape] : cases) {
    SCOPED_TRACE(body);
    std::vector<std::vector<double>> weights;
    const ConvRun single = RunConv(body, shape, DataType::kFloat32, true, Device::Cpu(), &weights);
    const ConvRun reference =
        RunConv(body, shape, DataType::kFloat64, true, Device::Cpu(), &weights);
    ExpectAllNear(single.top, reference.top, 2e-5, "top");
    ExpectAllNear(single.bottom_diff, reference.bottom_diff, 2e-5, "bottom diff");
    ExpectAllNear(single.weight_diff, reference.weight_diff, 2e-5, "weight diff");
    ExpectAllNear(single.bias_diff, reference.bias_diff, 2e-5, "bias diff");
    EXPECT_GT(std::abs(single.top[0] - single.top[1]) + std::abs(single.weight_diff[0]), 0.0);
  }
}

TEST(ConvolutionBackward, ParamDiffsAccumulate) {
  LayerParameter param =
      ParseLayerParam("type: 'Convolution' " + Conv("num_output: 3 kernel_size: 2 pad: 1"));
  ConvolutionLayer layer(param);
  layer.set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{2, 2, 4, 4}, DataType::kFloat64), top(DataType::kFloat64);
  FillUniform(&bottom, -1, 1);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  FillUniform(&top, -1, 1, 7);
  top.CopyFrom(top, false);
  // Move the random values into the top diff.
  for (int64_t i = 0; i < top.count(); ++i) top.mutable_cpu_diff<double>()[i] = top.data_at(i);
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  std::vector<double> weight_once, bias_once, bottom_once;
  for (int64_t i = 0; i < layer.blobs()[0]->count(); ++i)
    weight_once.push_back(layer.blobs()[0]->diff_at(i));
  for (int64_t i = 0; i < layer.blobs()[1]->count(); ++i)
    bias_once.push_back(layer.blobs()[1]->diff_at(i));
  for (int64_t i = 0; i < bottom.count(); ++i) bottom_once.push_back(bottom.diff_at(i));
  layer.Backward({&top}, {true}, {&bottom});
  for (size_t i = 0; i < weight_once.size(); ++i)
    EXPECT_NEAR(layer.blobs()[0]->diff_at(i), 2 * weight_once[i], 1e-12);
  for (size_t i = 0; i < bias_once.size(); ++i)
    EXPECT_NEAR(layer.blobs()[1]->diff_at(i), 2 * bias_once[i], 1e-12);
  // The bottom diff is overwritten, not accumulated.
  for (size_t i = 0; i < bottom_once.size(); ++i)
    EXPECT_NEAR(bottom.diff_at(i), bottom_once[i], 1e-12);
  // The bias diff is the sum of the top diff over batch and space.
  double sum0 = 0;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 25; ++i) sum0 += top.diff_at(n * 75 + i);
  EXPECT_NEAR(bias_once[0], sum0, 1e-12);
}

TEST(ConvolutionBackward, PropagateDownFalseLeavesBottomDiff) {
  LayerParameter param =
      ParseLayerParam("type: 'Convolution' " + Conv("num_output: 2 kernel_size: 3"));
  ConvolutionLayer layer(param);
  Blob bottom(std::vector<int>{1, 2, 5, 5}), top;
  FillUniform(&bottom, -1, 1);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  for (int64_t i = 0; i < bottom.count(); ++i) bottom.mutable_cpu_diff<float>()[i] = 42.0f;
  for (int64_t i = 0; i < top.count(); ++i) top.mutable_cpu_diff<float>()[i] = 1.0f;
  layer.Backward({&top}, {false}, {&bottom});
  for (int64_t i = 0; i < bottom.count(); ++i) ASSERT_EQ(bottom.diff_at(i), 42.0);
  EXPECT_GT(layer.blobs()[0]->asum_diff(), 0.0);
}

TEST(ConvolutionGradient, DoubleFreeStanding) {
  // Gradient of a mode mix the conformance cases do not combine: 3-D, group, dilation, no bias.
  LayerParameter param = ParseLayerParam(
      "type: 'Convolution' " +
      Conv("num_output: 4 kernel_size: 2 group: 2 dilation: 2 pad: 1 bias_term: false"));
  ConvolutionLayer layer(param);
  layer.set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{2, 4, 4, 3, 5}, DataType::kFloat64), top(DataType::kFloat64);
  FillGaussian(&bottom, 0, 1);
  layer.SetUp({&bottom}, {&top});
  CheckGradient(&layer, {&bottom}, {&top});
}

// 1x1 kernels with stride 1 and pad 0 run GEMMs straight on bottom and top (no im2col): forward,
// weight, bias and bottom gradients against sums written out in double, for several images,
// groups, 1-3 spatial axes and both precisions; param diffs accumulate onto what was there.
TEST(ConvolutionOneByOne, ForwardAndBackwardMatchDirectSums) {
  struct Case {
    std::string param;
    std::vector<int> shape;
    int num_output, group;
    bool bias;
  };
  const std::vector<Case> cases = {
      {"num_output: 5 kernel_size: 1", {3, 4, 3, 5}, 5, 1, true},
      {"num_output: 6 kernel_size: 1 group: 2 bias_term: false", {2, 4, 2, 3}, 6, 2, false},
      {"num_output: 4 kernel_size: 1 group: 4", {2, 8, 5}, 4, 4, true},
      {"num_output: 3 kernel_size: 1 stride: 1 pad: 0", {2, 2, 2, 3, 2}, 3, 1, true},
      {"num_output: 7 kernel_size: 1", {4, 9, 1, 1}, 7, 1, true},
  };
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
      SCOPED_TRACE(c.param + " " + DataTypeName(dtype));
      ConvolutionLayer layer(ParseLayerParam("type: 'Convolution' " + Conv(c.param)));
      layer.set_dtype(dtype);
      Blob bottom(c.shape, dtype), top(dtype);
      FillUniform(&bottom, -1, 1);
      layer.SetUp({&bottom}, {&top});
      ASSERT_EQ(layer.blobs().size(), c.bias ? 2u : 1u);
      const int num = c.shape[0], channels = c.shape[1];
      int64_t spatial = 1;
      for (size_t i = 2; i < c.shape.size(); ++i) spatial *= c.shape[i];
      const int in_g = channels / c.group, out_g = c.num_output / c.group;
      const Blob& w = *layer.blobs()[0];
      auto x = [&](int n, int ch, int64_t s) {
        return bottom.data_at((n * channels + ch) * spatial + s);
      };
      auto dy = [&](int n, int o, int64_t s) {
        return top.diff_at((n * c.num_output + o) * spatial + s);
      };
      const double tol = dtype == DataType::kFloat64 ? 1e-12 : 2e-5;

      layer.Forward({&bottom}, {&top});
      ASSERT_EQ(top.count(), int64_t{num} * c.num_output * spatial);
      for (int n = 0; n < num; ++n)
        for (int o = 0; o < c.num_output; ++o)
          for (int64_t s = 0; s < spatial; ++s) {
            double sum = c.bias ? layer.blobs()[1]->data_at(o) : 0.0;
            for (int ci = 0; ci < in_g; ++ci)
              sum += w.data_at(o * in_g + ci) * x(n, o / out_g * in_g + ci, s);
            ASSERT_NEAR(top.data_at((n * c.num_output + o) * spatial + s), sum, tol)
                << n << " " << o;
          }

      FillUniform(&top, -1, 1, 11);
      CREMA_DISPATCH_FLOAT(dtype, T, {
        for (int64_t i = 0; i < top.count(); ++i)
          top.mutable_cpu_diff<T>()[i] = static_cast<T>(top.data_at(i));
        for (auto& blob : layer.blobs())
          for (int64_t i = 0; i < blob->count(); ++i) blob->mutable_cpu_diff<T>()[i] = T(0.25);
      });
      layer.Backward({&top}, {true}, {&bottom});
      for (int o = 0; o < c.num_output; ++o) {
        for (int ci = 0; ci < in_g; ++ci) {
          double sum = 0.25;
          for (int n = 0; n < num; ++n)
            for (int64_t s = 0; s < spatial; ++s)
              sum += dy(n, o, s) * x(n, o / out_g * in_g + ci, s);
          ASSERT_NEAR(w.diff_at(o * in_g + ci), sum, tol * std::max(1.0, std::abs(sum)));
        }
        if (c.bias) {
          double sum = 0.25;
          for (int n = 0; n < num; ++n)
            for (int64_t s = 0; s < spatial; ++s) sum += dy(n, o, s);
          ASSERT_NEAR(layer.blobs()[1]->diff_at(o), sum, tol * std::max(1.0, std::abs(sum)));
        }
      }
      for (int n = 0; n < num; ++n)
        for (int ch = 0; ch < channels; ++ch)
          for (int64_t s = 0; s < spatial; ++s) {
            const int g = ch / in_g;
            double sum = 0;
            for (int oi = 0; oi < out_g; ++oi) {
              const int o = g * out_g + oi;
              sum += w.data_at(o * in_g + ch % in_g) * dy(n, o, s);
            }
            ASSERT_NEAR(bottom.diff_at((n * channels + ch) * spatial + s), sum, tol);
          }
    }
  }
}

TEST(ConvolutionWeights, LoadedBlobsAreUsedAndConverted) {
  LayerParameter param = ParseLayerParam(
      "name: 'c' type: 'Convolution' convolution_param { num_output: 2 "
      "kernel_size: 1 weight_filler { type: 'gaussian' std: 10 } }");
  BlobProto* weights = param.add_blobs();
  for (int d : {2, 1, 1, 1}) weights->mutable_shape()->add_dim(d);
  weights->add_data(2.0f);
  weights->add_data(-3.0f);
  // Caffe's legacy 4-D bias shape (1, 1, 1, N) is accepted.
  BlobProto* bias = param.add_blobs();
  bias->set_num(1);
  bias->set_channels(1);
  bias->set_height(1);
  bias->set_width(2);
  bias->add_data(0.5f);
  bias->add_data(1.0f);
  ConvolutionLayer layer(param);
  layer.set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{1, 1, 2, 2}, DataType::kFloat64), top(DataType::kFloat64);
  for (int i = 0; i < 4; ++i) bottom.mutable_cpu_data<double>()[i] = i + 1;
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(layer.blobs()[0]->dtype(), DataType::kFloat64);
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{2}));
  layer.Forward({&bottom}, {&top});
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(top.data_at(i), 2.0 * (i + 1) + 0.5);
    EXPECT_DOUBLE_EQ(top.data_at(4 + i), -3.0 * (i + 1) + 1.0);
  }
}

TEST(ConvolutionWeights, WrongLoadedShapeNamesBoth) {
  LayerParameter param = ParseLayerParam(
      "name: 'c' type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 }");
  BlobProto* weights = param.add_blobs();
  for (int d : {4, 2, 3, 3}) weights->mutable_shape()->add_dim(d);
  for (int i = 0; i < 72; ++i) weights->add_data(0.0f);
  BlobProto* bias = param.add_blobs();
  bias->mutable_shape()->add_dim(4);
  for (int i = 0; i < 4; ++i) bias->add_data(0.0f);
  ConvolutionLayer layer(param);
  Blob bottom(std::vector<int>{1, 3, 5, 5}), top;
  try {
    layer.SetUp({&bottom}, {&top});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("(4 3 3 3)"), std::string::npos) << what;
    EXPECT_NE(what.find("(4 2 3 3)"), std::string::npos) << what;
    EXPECT_NE(what.find("layer \"c\""), std::string::npos) << what;
  }
}

TEST(ConvolutionWeights, MissingBiasBlob) {
  LayerParameter param = ParseLayerParam(
      "name: 'c' type: 'Convolution' convolution_param { num_output: 1 kernel_size: 1 }");
  BlobProto* weights = param.add_blobs();
  for (int d : {1, 1, 1, 1}) weights->mutable_shape()->add_dim(d);
  weights->add_data(1.0f);
  ConvolutionLayer layer(param);
  Blob bottom(std::vector<int>{1, 1, 2, 2}), top;
  EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError);
}

// SetUp must throw ConfigError whose message contains `field`.
void ExpectParamError(const std::string& body, const std::vector<int>& bottom_shape,
                      const std::string& field, bool fillers = true) {
  SCOPED_TRACE(body);
  LayerParameter param = ParseLayerParam("name: 'bad' type: 'Convolution' " + Conv(body, fillers));
  auto layer = LayerRegistry::Create(param);
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom, top;
  blobs.push_back(std::make_unique<Blob>(bottom_shape));
  bottom.push_back(blobs.back().get());
  blobs.push_back(std::make_unique<Blob>());
  top.push_back(blobs.back().get());
  try {
    layer->SetUp(bottom, top);
    ADD_FAILURE() << "expected a ConfigError mentioning " << field;
  } catch (const ConfigError& e) {
    if (std::getenv("CREMA_PRINT_ERRORS")) std::printf("%s\n", e.what());
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Convolution)"), std::string::npos)
        << e.what();
  }
}

TEST(ConvolutionErrors, Parameters) {
  const std::vector<int> shape = {1, 4, 6, 6};
  ExpectParamError("num_output: 2 kernel_size: 0", shape, "convolution_param.kernel_size");
  ExpectParamError("num_output: 2", shape, "convolution_param.kernel_size");
  ExpectParamError("num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3", shape,
                   "convolution_param.kernel_size");
  ExpectParamError("num_output: 2 kernel_h: 3", shape, "convolution_param.kernel_w");
  ExpectParamError("num_output: 2 kernel_size: 3 kernel_size: 3 kernel_size: 3", shape,
                   "convolution_param.kernel_size");
  ExpectParamError("num_output: 2 kernel_h: 3 kernel_w: 3", {1, 4, 6, 6, 6},
                   "convolution_param.kernel_h");
  ExpectParamError("num_output: 2 kernel_size: 3 stride: 0", shape, "convolution_param.stride");
  ExpectParamError("num_output: 2 kernel_size: 3 stride_h: 2", shape, "convolution_param.stride_w");
  ExpectParamError("num_output: 2 kernel_size: 3 stride: 1 stride_h: 2 stride_w: 2", shape,
                   "convolution_param.stride");
  ExpectParamError("num_output: 2 kernel_size: 3 pad: 1 pad_h: 1", shape, "convolution_param.pad");
  ExpectParamError("num_output: 2 kernel_size: 3 dilation: 0", shape, "convolution_param.dilation");
  ExpectParamError("num_output: 2 kernel_size: 3 dilation: 1 dilation: 1 dilation: 1", shape,
                   "convolution_param.dilation");
  ExpectParamError("num_output: 0 kernel_size: 3", shape, "convolution_param.num_output");
  ExpectParamError("kernel_size: 3", shape, "convolution_param.num_output");
  ExpectParamError("num_output: 2 kernel_size: 3 group: 3", shape, "convolution_param.group");
  ExpectParamError("num_output: 3 kernel_size: 3 group: 2", shape, "convolution_param.group");
  ExpectParamError("num_output: 2 kernel_size: 3 group: 0", shape, "convolution_param.group");
  ExpectParamError("num_output: 2 kernel_size: 3 axis: 4", shape, "convolution_param.axis");
  ExpectParamError("num_output: 2 kernel_size: 3 weight_filler { type: 'nonsense' }", shape,
                   "convolution_param.weight_filler", false);
}

TEST(ConvolutionErrors, Shapes) {
  LayerParameter param =
      ParseLayerParam("name: 'c' type: 'Convolution' " + Conv("num_output: 2 kernel_size: 3"));
  {
    ConvolutionLayer layer(param);
    Blob a(std::vector<int>{1, 2, 5, 5}), b(std::vector<int>{1, 2, 5, 6}), ta, tb;
    EXPECT_THROW(layer.SetUp({&a, &b}, {&ta, &tb}), ConfigError);
  }
  {
    ConvolutionLayer layer(param);
    Blob a(std::vector<int>{1, 2, 5, 5}), ta;
    EXPECT_THROW(layer.SetUp({&a}, {}), ConfigError);  // tops != bottoms
  }
  {
    // Channels may not change after set-up; nor the number of axes.
    ConvolutionLayer layer(param);
    Blob a(std::vector<int>{1, 2, 5, 5}), t;
    layer.SetUp({&a}, {&t});
    a.Reshape({1, 3, 5, 5});
    EXPECT_THROW(layer.Reshape({&a}, {&t}), ConfigError);
    a.Reshape({1, 2, 5, 5, 5});
    EXPECT_THROW(layer.Reshape({&a}, {&t}), ConfigError);
    // A larger spatial size is fine.
    a.Reshape({3, 2, 7, 6});
    layer.Reshape({&a}, {&t});
    EXPECT_EQ(t.shape(), (std::vector<int>{3, 2, 5, 4}));
  }
  {
    // The kernel must fit the padded input.
    ConvolutionLayer layer(param);
    Blob a(std::vector<int>{1, 2, 1, 5}), t;
    EXPECT_THROW(layer.SetUp({&a}, {&t}), ConfigError);
  }
  {
    ConvolutionLayer layer(param);
    Blob a(std::vector<int>{1, 2, 5, 5});
    EXPECT_THROW(layer.SetUp({&a}, {&a}), ConfigError);  // not in-place
    EXPECT_FALSE(layer.AllowsInPlace());
  }
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diff, param diffs) ----

std::shared_ptr<Blob> LoadF32(const std::string& path, const std::vector<int>& shape) {
  const std::vector<float> values = testing::ReadF32(path);
  auto blob = std::make_shared<Blob>(shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), blob->count()) << path;
  std::copy(values.begin(), values.end(), blob->mutable_cpu_data<float>());
  return blob;
}

void ExpectNearRef(const Blob& actual, const std::string& path, bool diff) {
  const std::vector<float> expected = testing::ReadF32(path);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << path;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    ASSERT_NEAR(a, expected[i], 2e-5 * std::max(scale, 1e-3)) << path << " at " << i;
  }
}

struct ZooCase {
  const char* layer;
  const char* bottom;
  std::vector<int> bottom_shape;
  const char* top;
  const char* top_diff;
  const char* bottom_diff;
  int num_params;
};
void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.layer; }

class ConvolutionCaffeTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ConvolutionCaffeTest, MatchesLayerZoo) {
  const ZooCase& c = GetParam();
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  NetParameter net;
  {
    std::ifstream in(dir + "/layer_zoo.caffemodel", std::ios::binary);
    ASSERT_TRUE(net.ParseFromIstream(&in));
  }
  const LayerParameter* found = nullptr;
  for (const LayerParameter& l : net.layer())
    if (l.name() == c.layer) found = &l;
  ASSERT_NE(found, nullptr) << c.layer;
  ConvolutionLayer layer(*found);
  auto bottom = LoadF32(dir + "/" + c.bottom, c.bottom_shape);
  Blob top;
  layer.SetUp({bottom.get()}, {&top});
  layer.Forward({bottom.get()}, {&top});
  ExpectNearRef(top, dir + "/" + c.top, false);
  const std::vector<float> top_diff = testing::ReadF32(dir + "/" + c.top_diff);
  ASSERT_EQ(static_cast<int64_t>(top_diff.size()), top.count());
  std::copy(top_diff.begin(), top_diff.end(), top.mutable_cpu_diff<float>());
  ASSERT_EQ(static_cast<int>(layer.blobs().size()), c.num_params);
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {bottom.get()});
  ExpectNearRef(*bottom, dir + "/" + c.bottom_diff, true);
  for (int p = 0; p < c.num_params; ++p) {
    const std::string index = std::string(c.top).substr(4, 3);
    ExpectNearRef(*layer.blobs()[p],
                  StrCat(dir, "/grad/", index, "_", c.layer, "__param", p, ".f32"), true);
  }
}

INSTANTIATE_TEST_SUITE_P(
    LayerZoo, ConvolutionCaffeTest,
    ::testing::Values(ZooCase{"conv_a",
                              "inputs/data.f32",
                              {2, 3, 8, 8},
                              "fwd/011_conv_a__top0_conv_a.f32",
                              "bwd/012_conv_a_conv_a_0_split__bottom0_conv_a.f32",
                              "bwd/011_conv_a__bottom0_data_in_data_0_split_0.f32",
                              2},
                      ZooCase{"conv_g",
                              "fwd/011_conv_a__top0_conv_a.f32",
                              {2, 6, 8, 8},
                              "fwd/013_conv_g__top0_conv_g.f32",
                              "bwd/014_conv_g_conv_g_0_split__bottom0_conv_g.f32",
                              "bwd/013_conv_g__bottom0_conv_a_conv_a_0_split_0.f32",
                              2},
                      ZooCase{"conv_rect",
                              "inputs/data.f32",
                              {2, 3, 8, 8},
                              "fwd/015_conv_rect__top0_conv_rect.f32",
                              "bwd/016_conv_rect_conv_rect_0_split__bottom0_conv_rect.f32",
                              "bwd/015_conv_rect__bottom0_data_in_data_0_split_1.f32",
                              1}),
    [](const ::testing::TestParamInfo<ZooCase>& info) { return std::string(info.param.layer); });

}  // namespace
}  // namespace crema
