#include "layers/convolution_depthwise/convolution_depthwise_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"

namespace crema {
namespace {

using testing::ParseLayerParam;

constexpr const char* kFillers =
    " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";

std::string Conv(const std::string& body) {
  return "convolution_param { " + body + kFillers + " }";
}

}  // namespace
}  // namespace crema

// ShuffleNet's first depthwise layer gives neither group nor a matching num_output. The other
// cases cover the GPU kernels' branches: dilation, rectangular kernels and unequal strides, no
// bias, no bottom gradient, a kernel larger than the padded input, batch axes before the channel
// axis, a channel multiplier, and (DepthwiseConvolution with group < C) Convolution's GPU path.
CREMA_LAYER_CONFORMANCE(
    ConvolutionDepthwise,
    LayerCase(crema::Conv("kernel_size: 3 pad: 1 stride: 2"), {{2, 3, 6, 5}}).Name("no_group"),
    LayerCase(crema::Conv("num_output: 4 group: 4 kernel_size: 3 pad: 1"), {{1, 4, 5, 5}})
        .Name("explicit"),
    LayerCase(crema::Conv("kernel_size: 3 dilation: 2 pad: 2"), {{2, 3, 7, 6}}).Name("dilated"),
    LayerCase(crema::Conv("kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 "
                          "bias_term: false"),
              {{2, 2, 6, 5}})
        .Name("rectangular_no_bias"),
    LayerCase(crema::Conv("kernel_size: 3 stride: 2 pad: 1"), {{2, 3, 5, 5}})
        .NoGradient(0)
        .Name("params_only"),
    LayerCase(crema::Conv("kernel_size: 5 pad: 1"), {{1, 2, 3, 3}}).Name("kernel_over_input"),
    LayerCase(crema::Conv("kernel_size: 3 pad: 1 axis: 2"), {{2, 2, 3, 4, 4}}).Name("axis2"));

CREMA_LAYER_CONFORMANCE(
    DepthwiseConvolution,
    LayerCase(crema::Conv("num_output: 3 group: 3 kernel_size: 3 pad: 1"), {{2, 3, 5, 4}})
        .Name("group_channels"),
    LayerCase(crema::Conv("num_output: 6 group: 3 kernel_size: 3 pad: 1 stride: 2"), {{2, 3, 5, 5}})
        .Name("multiplier"),
    LayerCase(crema::Conv("num_output: 4 group: 2 kernel_size: 3"), {{1, 4, 5, 5}}).Name("grouped"),
    LayerCase(crema::Conv("num_output: 2 group: 2 kernel_size: 3 pad: 1"), {{1, 2, 3, 4, 4}})
        .Name("three_d"));

namespace crema {
namespace {

// Builds `type` with the given weights (C, 1, 2, 2) and bias and runs it on a 1xCx3x3 input
// holding 1, 2, ...
std::vector<double> RunByHand(const std::string& type, const std::string& body, int channels,
                              const std::vector<float>& weights, const std::vector<float>& bias,
                              std::vector<int>* top_shape) {
  LayerParameter param =
      ParseLayerParam("name: 'dw' type: '" + type + "' convolution_param { " + body + " }");
  BlobProto* w = param.add_blobs();
  for (int d : {channels, 1, 2, 2}) w->mutable_shape()->add_dim(d);
  for (float v : weights) w->add_data(v);
  BlobProto* b = param.add_blobs();
  b->mutable_shape()->add_dim(channels);
  for (float v : bias) b->add_data(v);
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  layer->set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{1, channels, 3, 3}, DataType::kFloat64), top(DataType::kFloat64);
  for (int i = 0; i < bottom.count(); ++i) bottom.mutable_cpu_data<double>()[i] = i + 1;
  layer->SetUp({&bottom}, {&top});
  layer->Forward({&bottom}, {&top});
  *top_shape = top.shape();
  std::vector<double> out(top.count());
  for (int i = 0; i < top.count(); ++i) out[i] = top.data_at(i);
  return out;
}

TEST(ConvolutionDepthwiseLayerTest, OneFilterPerChannelWhateverNumOutputSays) {
  // num_output 5 and group 1 are ignored, as the fork's layer ignores them: 2 channels in, 2 out.
  std::vector<int> shape;
  const std::vector<double> top =
      RunByHand("ConvolutionDepthwise", "num_output: 5 group: 1 kernel_size: 2 stride: 1", 2,
                {1, 0, 0, 1, 0, 2, 0, 0}, {0.5f, -1.f}, &shape);
  ASSERT_EQ(shape, (std::vector<int>{1, 2, 2, 2}));
  // Channel 0 (x = 1..9, kernel [[1,0],[0,1]]): x(i,j) + x(i+1,j+1) + 0.5.
  // Channel 1 (x = 10..18, kernel [[0,2],[0,0]]): 2 x(i,j+1) - 1.
  const std::vector<double> expected = {1 + 5 + 0.5, 2 + 6 + 0.5, 4 + 8 + 0.5, 5 + 9 + 0.5,
                                        2 * 11 - 1,  2 * 12 - 1,  2 * 14 - 1,  2 * 15 - 1};
  EXPECT_EQ(top, expected);
}

TEST(ConvolutionDepthwiseLayerTest, TypeNamesAndParamShapes) {
  for (const char* type : {"ConvolutionDepthwise", "DepthwiseConvolution"}) {
    LayerParameter param = ParseLayerParam(
        std::string("name: 'dw' type: '") + type +
        "' convolution_param { num_output: 6 group: 6 kernel_size: 3 stride: 2 pad: 1 }");
    std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
    EXPECT_STREQ(layer->type(), type);
    Blob bottom(std::vector<int>{2, 6, 7, 7}), top;
    layer->SetUp({&bottom}, {&top});
    EXPECT_EQ(top.shape(), (std::vector<int>{2, 6, 4, 4})) << type;
    ASSERT_EQ(layer->blobs().size(), 2u);
    EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{6, 1, 3, 3})) << type;
    EXPECT_EQ(layer->blobs()[1]->shape(), (std::vector<int>{6})) << type;
  }
}

TEST(ConvolutionDepthwiseLayerTest, DepthwiseConvolutionKeepsConvolutionParameters) {
  // The DepthwiseConvolution fork is a Convolution subclass: group is what the prototxt says.
  LayerParameter param = ParseLayerParam(
      "name: 'dw' type: 'DepthwiseConvolution' convolution_param { num_output: 4 group: 2 "
      "kernel_size: 1 }");
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{1, 6, 3, 3}), top;
  layer->SetUp({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{1, 4, 3, 3}));
  EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{4, 3, 1, 1}));
}

}  // namespace
}  // namespace crema
