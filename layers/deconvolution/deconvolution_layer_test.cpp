#include "layers/deconvolution/deconvolution_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

constexpr const char* kFillers =
    " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";

std::string Deconv(const std::string& body) {
  return "convolution_param { " + body + kFillers + " }";
}

}  // namespace
}  // namespace crema

CREMA_LAYER_CONFORMANCE(
    Deconvolution,
    LayerCase(crema::Deconv("num_output: 4 kernel_size: 3"), {{2, 3, 4, 3}}).Name("basic"),
    LayerCase(crema::Deconv("num_output: 2 kernel_size: 3"), {{2, 3, 3, 3}, {2, 3, 3, 3}})
        .Tops(2)
        .Name("two_bottoms"),
    LayerCase(crema::Deconv("num_output: 3 kernel_size: 4 stride: 2 pad: 1"), {{2, 2, 3, 4}})
        .Name("stride_pad"),
    LayerCase(crema::Deconv("num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 "
                            "pad_h: 1 pad_w: 0 bias_term: false"),
              {{2, 3, 3, 4}})
        .Name("rectangular_no_bias"),
    LayerCase(crema::Deconv("num_output: 2 kernel_size: 3 dilation: 2 pad: 1"), {{1, 2, 3, 4}})
        .Name("dilation"),
    LayerCase(crema::Deconv("num_output: 6 kernel_size: 3 group: 2 stride: 2"), {{2, 4, 3, 3}})
        .Name("group"),
    LayerCase(crema::Deconv("num_output: 5 kernel_size: 1"), {{2, 3, 4, 5}}).Name("one_by_one"),
    LayerCase(crema::Deconv("num_output: 4 kernel_size: 1 stride: 2 group: 2"), {{2, 2, 3, 3}})
        .Name("one_by_one_stride_group"),
    LayerCase(crema::Deconv("num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 "
                            "stride: 2 stride: 1 stride: 1 pad: 1"),
              {{2, 2, 3, 2, 2}})
        .Name("three_d"),
    LayerCase(crema::Deconv("num_output: 2 kernel_size: 3 dilation: 1 dilation: 2 "
                            "force_nd_im2col: true pad: 1 stride: 2"),
              {{2, 2, 3, 3}})
        .Name("force_nd"),
    LayerCase(crema::Deconv("num_output: 3 kernel_size: 3 stride: 2"), {{2, 2, 4}}).Name("one_d"),
    LayerCase(crema::Deconv("num_output: 3 kernel_size: 2 axis: 2"), {{2, 2, 3, 3, 2}})
        .Name("axis2"));

namespace crema {
namespace {

using testing::FillUniform;
using testing::ParseLayerParam;
using testing::RunZooCase;
using testing::ZooCase;

// Transposed convolution by definition, in double, for any number of spatial axes: every input
// x[n][c][i] adds w[c][o'][k] * x to top[n][g * out_per_group + o'][i * s - p + k * d].
std::vector<double> NaiveDeconv(const Blob& bottom, const Blob& weight, const Blob* bias,
                                int num_output, int group, const std::vector<int>& pad,
                                const std::vector<int>& stride, const std::vector<int>& dilation,
                                std::vector<int>* top_shape) {
  const int axes = bottom.num_axes() - 2;
  const int num = bottom.shape(0), channels = bottom.shape(1);
  std::vector<int> in(axes), kernel(axes), out(axes);
  int64_t in_volume = 1, kernel_volume = 1, out_volume = 1;
  for (int a = 0; a < axes; ++a) {
    in[a] = bottom.shape(2 + a);
    kernel[a] = weight.shape(2 + a);
    out[a] = stride[a] * (in[a] - 1) + dilation[a] * (kernel[a] - 1) + 1 - 2 * pad[a];
    in_volume *= in[a];
    kernel_volume *= kernel[a];
    out_volume *= out[a];
  }
  *top_shape = {num, num_output};
  top_shape->insert(top_shape->end(), out.begin(), out.end());
  const int in_per_group = channels / group, out_per_group = num_output / group;
  std::vector<double> top(static_cast<size_t>(num) * num_output * out_volume, 0.0);
  std::vector<int> x(axes), k(axes);
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c) {
      const int g = c / in_per_group;
      for (int64_t xi = 0; xi < in_volume; ++xi) {
        int64_t rest = xi;
        for (int a = axes - 1; a >= 0; --a) {
          x[a] = static_cast<int>(rest % in[a]);
          rest /= in[a];
        }
        const double value =
            bottom.data_at((static_cast<int64_t>(n) * channels + c) * in_volume + xi);
        for (int op = 0; op < out_per_group; ++op)
          for (int64_t ki = 0; ki < kernel_volume; ++ki) {
            int64_t krest = ki;
            for (int a = axes - 1; a >= 0; --a) {
              k[a] = static_cast<int>(krest % kernel[a]);
              krest /= kernel[a];
            }
            int64_t index = 0;
            bool inside = true;
            for (int a = 0; a < axes; ++a) {
              const int y = x[a] * stride[a] - pad[a] + k[a] * dilation[a];
              inside = inside && y >= 0 && y < out[a];
              index = index * out[a] + y;
            }
            if (!inside) continue;
            const int o = g * out_per_group + op;
            top[(static_cast<size_t>(n) * num_output + o) * out_volume + index] +=
                weight.data_at((static_cast<int64_t>(c) * out_per_group + op) * kernel_volume +
                               ki) *
                value;
          }
      }
    }
  if (bias)
    for (int n = 0; n < num; ++n)
      for (int o = 0; o < num_output; ++o)
        for (int64_t i = 0; i < out_volume; ++i)
          top[(static_cast<size_t>(n) * num_output + o) * out_volume + i] += bias->data_at(o);
  return top;
}

struct NaiveCase {
  std::string param;
  std::vector<int> bottom_shape;
  int num_output, group;
  std::vector<int> pad, stride, dilation;
  bool bias;
};
void PrintTo(const NaiveCase& c, std::ostream* os) { *os << c.param; }

class DeconvolutionNaiveTest : public ::testing::TestWithParam<NaiveCase> {};

TEST_P(DeconvolutionNaiveTest, ForwardMatchesDirectLoops) {
  const NaiveCase& c = GetParam();
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    LayerParameter param = ParseLayerParam("name: 'd' type: 'Deconvolution' " + Deconv(c.param));
    DeconvolutionLayer layer(param);
    layer.set_dtype(dtype);
    Blob bottom(c.bottom_shape, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    std::vector<int> expected_shape;
    const std::vector<double> expected =
        NaiveDeconv(bottom, *layer.blobs()[0], c.bias ? layer.blobs()[1].get() : nullptr,
                    c.num_output, c.group, c.pad, c.stride, c.dilation, &expected_shape);
    ASSERT_EQ(top.shape(), expected_shape);
    const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
    for (int64_t i = 0; i < top.count(); ++i)
      ASSERT_NEAR(top.data_at(i), expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
          << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, DeconvolutionNaiveTest,
    ::testing::Values(
        NaiveCase{"num_output: 4 kernel_size: 3", {2, 3, 4, 3}, 4, 1, {0, 0}, {1, 1}, {1, 1}, true},
        NaiveCase{"num_output: 3 kernel_size: 4 stride: 2 pad: 1",
                  {2, 2, 3, 4},
                  3,
                  1,
                  {1, 1},
                  {2, 2},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 3 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 "
                  "pad_w: 0 bias_term: false",
                  {2, 3, 3, 4},
                  3,
                  1,
                  {1, 0},
                  {2, 1},
                  {1, 1},
                  false},
        NaiveCase{"num_output: 4 kernel_size: 3 group: 2 dilation: 2 pad: 2 stride: 2",
                  {2, 6, 4, 4},
                  4,
                  2,
                  {2, 2},
                  {2, 2},
                  {2, 2},
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
                  {1, 3, 3, 3},
                  2,
                  1,
                  {0, 0},
                  {2, 2},
                  {1, 1},
                  true},
        NaiveCase{"num_output: 3 kernel_size: 3 kernel_size: 2 kernel_size: 2 stride: 2 pad: 1 "
                  "dilation: 1 dilation: 1 dilation: 2",
                  {2, 2, 3, 2, 3},
                  3,
                  1,
                  {1, 1, 1},
                  {2, 2, 2},
                  {1, 1, 2},
                  true},
        NaiveCase{"num_output: 3 kernel_size: 4 stride: 3 pad: 2",
                  {2, 2, 5},
                  3,
                  1,
                  {2},
                  {3},
                  {1},
                  true}));

std::vector<int> OutputShape(const std::string& body, const std::vector<int>& bottom_shape) {
  DeconvolutionLayer layer(ParseLayerParam("type: 'Deconvolution' " + Deconv(body)));
  Blob bottom(bottom_shape), top;
  layer.SetUp({&bottom}, {&top});
  return top.shape();
}

TEST(DeconvolutionShape, CaffeOutputSizes) {
  // FCN-style 2x upsampling: 2 * (16 - 1) + 4 - 2 = 32.
  EXPECT_EQ(OutputShape("num_output: 21 kernel_size: 4 stride: 2 pad: 1", {1, 21, 16, 16}),
            (std::vector<int>{1, 21, 32, 32}));
  EXPECT_EQ(OutputShape("num_output: 2 kernel_size: 3", {1, 1, 5, 7}),
            (std::vector<int>{1, 2, 7, 9}));
  EXPECT_EQ(OutputShape("num_output: 2 kernel_size: 3 dilation: 2 stride: 3", {1, 1, 4, 2}),
            (std::vector<int>{1, 2, 14, 8}));
  DeconvolutionLayer layer(ParseLayerParam(
      "type: 'Deconvolution' " + Deconv("num_output: 6 kernel_h: 3 kernel_w: 2 group: 3")));
  Blob bottom(std::vector<int>{2, 9, 5, 5}), top;
  layer.SetUp({&bottom}, {&top});
  // Weights are (C, num_output / group, kernel...).
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{9, 2, 3, 2}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (std::vector<int>{6}));
}

TEST(DeconvolutionErrors, Parameters) {
  for (auto [body, field] : std::vector<std::pair<std::string, std::string>>{
           {"num_output: 0 kernel_size: 3", "convolution_param.num_output"},
           {"num_output: 2", "convolution_param.kernel_size"},
           {"num_output: 3 kernel_size: 3 group: 2", "convolution_param.group"},
           {"num_output: 2 kernel_size: 3 stride: 0", "convolution_param.stride"}}) {
    SCOPED_TRACE(body);
    DeconvolutionLayer layer(ParseLayerParam("name: 'bad' type: 'Deconvolution' " + Deconv(body)));
    Blob bottom(std::vector<int>{1, 4, 3, 3}), top;
    try {
      layer.SetUp({&bottom}, {&top});
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Deconvolution)"), std::string::npos)
          << e.what();
    }
  }
  // 1 * (1 - 1) + 1 - 2 * 1 < 1: nothing left.
  DeconvolutionLayer layer(ParseLayerParam("name: 'bad' type: 'Deconvolution' " +
                                           Deconv("num_output: 2 kernel_size: 1 pad: 1")));
  Blob bottom(std::vector<int>{1, 1, 1, 1}), top;
  EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(DeconvolutionCaffe, StridePad) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"deconv",
                          {{"fwd/013_conv_g__top0_conv_g.f32", {2, 4, 4, 4}}},
                          "fwd/017_deconv__top0_deconv.f32",
                          "bwd/018_deconv_deconv_0_split__bottom0_deconv.f32",
                          {"bwd/017_deconv__bottom0_conv_g_conv_g_0_split_0.f32"},
                          {"grad/017_deconv__param0.f32", "grad/017_deconv__param1.f32"}});
}

TEST(DeconvolutionCaffe, Group) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"deconv_grp",
                          {{"fwd/013_conv_g__top0_conv_g.f32", {2, 4, 4, 4}}},
                          "fwd/019_deconv_grp__top0_deconv_grp.f32",
                          "bwd/023_relu_plain__bottom0_deconv_grp.f32",
                          {"bwd/019_deconv_grp__bottom0_conv_g_conv_g_0_split_1.f32"},
                          {"grad/019_deconv_grp__param0.f32"}});
}

}  // namespace
}  // namespace crema
