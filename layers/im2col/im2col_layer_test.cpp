#include "layers/im2col/im2col_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Im2col, LayerCase("convolution_param { kernel_size: 3 }", {{2, 3, 5, 4}}).Name("basic"),
    LayerCase("convolution_param { kernel_size: 3 stride: 2 pad: 1 dilation: 2 }", {{1, 2, 6, 7}})
        .Name("stride_pad_dilation"),
    LayerCase("convolution_param { kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 1 "
              "pad_w: 0 }",
              {{2, 2, 4, 5}})
        .Name("rectangular"),
    LayerCase("convolution_param { kernel_size: 2 stride: 2 pad: 1 force_nd_im2col: true }",
              {{2, 2, 5, 4}})
        .Name("force_nd"),
    LayerCase("convolution_param { kernel_size: 2 kernel_size: 3 kernel_size: 2 pad: 1 }",
              {{1, 2, 3, 4, 3}})
        .Name("three_d"),
    LayerCase("convolution_param { kernel_size: 3 stride: 2 }", {{2, 3, 7}}).Name("one_d"),
    LayerCase("convolution_param { kernel_size: 2 axis: 2 }", {{2, 2, 2, 4, 3}}).Name("axis2"));

namespace crema::testing {
namespace {

// im2col by its definition, any number of spatial axes: for image n, column row
// (c * K + k) with kernel offset k, output position y:
// top = bottom[n][c][y * stride - pad + k * dilation] (0 outside).
std::vector<double> NaiveIm2col(const Blob& bottom, int channel_axis,
                                const std::vector<int>& kernel, const std::vector<int>& stride,
                                const std::vector<int>& pad, const std::vector<int>& dilation,
                                std::vector<int>* top_shape) {
  const int axes = static_cast<int>(kernel.size());
  const int64_t num = bottom.count(0, channel_axis);
  const int channels = bottom.shape(channel_axis);
  std::vector<int> in(axes), out(axes);
  int64_t kernel_volume = 1, out_volume = 1, in_volume = 1;
  for (int i = 0; i < axes; ++i) {
    in[i] = bottom.shape(channel_axis + 1 + i);
    out[i] = (in[i] + 2 * pad[i] - (dilation[i] * (kernel[i] - 1) + 1)) / stride[i] + 1;
    kernel_volume *= kernel[i];
    out_volume *= out[i];
    in_volume *= in[i];
  }
  *top_shape = std::vector<int>(bottom.shape().begin(), bottom.shape().begin() + channel_axis);
  top_shape->push_back(static_cast<int>(channels * kernel_volume));
  top_shape->insert(top_shape->end(), out.begin(), out.end());
  std::vector<double> top;
  std::vector<int> k(axes), y(axes);
  for (int64_t n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c)
      for (int64_t ki = 0; ki < kernel_volume; ++ki) {
        for (int a = axes - 1, r = static_cast<int>(ki); a >= 0; --a) {
          k[a] = r % kernel[a];
          r /= kernel[a];
        }
        for (int64_t yi = 0; yi < out_volume; ++yi) {
          for (int a = axes - 1, r = static_cast<int>(yi); a >= 0; --a) {
            y[a] = r % out[a];
            r /= out[a];
          }
          int64_t index = n * channels + c;
          bool inside = true;
          for (int a = 0; a < axes; ++a) {
            const int x = y[a] * stride[a] - pad[a] + k[a] * dilation[a];
            inside = inside && x >= 0 && x < in[a];
            index = index * in[a] + x;
          }
          top.push_back(inside ? bottom.data_at(index) : 0.0);
        }
      }
  return top;
}

struct NaiveCase {
  std::string param;
  std::vector<int> shape;
  int channel_axis;
  std::vector<int> kernel, stride, pad, dilation;
};

class Im2colNaive : public ::testing::TestWithParam<NaiveCase> {};

TEST_P(Im2colNaive, ForwardMatchesDefinitionBackwardIsAdjoint) {
  const NaiveCase& c = GetParam();
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    auto layer = CreateLayer("type: 'Im2col' convolution_param { " + c.param + " }", dtype);
    Blob bottom(c.shape, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer->SetUp({&bottom}, {&top});
    layer->Forward({&bottom}, {&top});
    std::vector<int> top_shape;
    const std::vector<double> expected =
        NaiveIm2col(bottom, c.channel_axis, c.kernel, c.stride, c.pad, c.dilation, &top_shape);
    ASSERT_EQ(top.shape(), top_shape);
    EXPECT_EQ(DataOf(top), expected);
    // Adjoint: <im2col(x), dy> = <x, col2im(dy)>.
    Blob dy_values(top.shape(), DataType::kFloat64);
    FillUniform(&dy_values, -1, 1, 7);
    std::vector<double> dy = DataOf(dy_values);
    for (double& v : dy) v = static_cast<float>(v);
    SetDiffOf(&top, dy);
    layer->Backward({&top}, {true}, {&bottom});
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < dy.size(); ++i) lhs += expected[i] * dy[i];
    for (int64_t i = 0; i < bottom.count(); ++i) rhs += bottom.data_at(i) * bottom.diff_at(i);
    EXPECT_NEAR(lhs, rhs, dtype == DataType::kFloat64 ? 1e-10 : 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Params, Im2colNaive,
    ::testing::Values(
        NaiveCase{"kernel_size: 3", {2, 3, 5, 4}, 1, {3, 3}, {1, 1}, {0, 0}, {1, 1}},
        NaiveCase{"kernel_size: 3 stride: 2 pad: 1 dilation: 2",
                  {1, 2, 7, 6},
                  1,
                  {3, 3},
                  {2, 2},
                  {1, 1},
                  {2, 2}},
        NaiveCase{"kernel_h: 2 kernel_w: 3 stride_h: 2 stride_w: 1 pad_h: 0 pad_w: 2",
                  {2, 2, 5, 4},
                  1,
                  {2, 3},
                  {2, 1},
                  {0, 2},
                  {1, 1}},
        NaiveCase{"kernel_size: 2 kernel_size: 3 stride: 1 stride: 2 pad: 1 force_nd_im2col: true",
                  {1, 2, 4, 5},
                  1,
                  {2, 3},
                  {1, 2},
                  {1, 1},
                  {1, 1}},
        NaiveCase{"kernel_size: 2 dilation: 1 dilation: 2 dilation: 1 pad: 1",
                  {1, 2, 3, 5, 3},
                  1,
                  {2, 2, 2},
                  {1, 1, 1},
                  {1, 1, 1},
                  {1, 2, 1}},
        NaiveCase{"kernel_size: 3 stride: 2 pad: 1", {2, 2, 6}, 1, {3}, {2}, {1}, {1}},
        NaiveCase{"kernel_size: 2 axis: 2", {2, 2, 3, 4, 3}, 2, {2, 2}, {1, 1}, {0, 0}, {1, 1}}));

void ExpectError(const std::string& param, const std::vector<int>& shape,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Im2col' convolution_param { " + param + " }");
  auto bottom = MakeBlob(shape, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Im2col)"), std::string::npos) << e.what();
  }
}

TEST(Im2colErrors, Messages) {
  const std::vector<int> s = {1, 2, 5, 5};
  ExpectError("", s, "convolution_param.kernel_size");
  ExpectError("kernel_size: 0", s, "convolution_param.kernel_size");
  ExpectError("kernel_size: 1 kernel_size: 2 kernel_size: 3", s, "convolution_param.kernel_size");
  ExpectError("kernel_h: 2", s, "convolution_param.kernel_w");
  ExpectError("kernel_size: 2 kernel_h: 2 kernel_w: 2", s, "convolution_param.kernel_size");
  ExpectError("kernel_h: 2 kernel_w: 2", {1, 2, 5}, "convolution_param.kernel_h");
  ExpectError("kernel_size: 2 stride: 0", s, "convolution_param.stride");
  ExpectError("kernel_size: 2 stride_h: 0 stride_w: 1", s, "convolution_param.stride_h");
  ExpectError("kernel_size: 2 dilation: 0", s, "convolution_param.dilation");
  ExpectError("kernel_size: 2 pad: 1 pad: 1 pad: 1", s, "convolution_param.pad");
  ExpectError("kernel_size: 2 axis: 4", s, "convolution_param.axis");
  ExpectError("kernel_size: 2 axis: 3", s, "at least one spatial axis");
  ExpectError("kernel_size: 6", s, "smaller than the kernel extent");
}

TEST(Im2colCaffe, LayerZoo) { CheckLayerAgainstCaffe("layer_zoo", "im2col"); }

}  // namespace
}  // namespace crema::testing
