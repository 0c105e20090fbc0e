#pragma once
// Depthwise convolution under the type names of the Caffe forks that MobileNet and ShuffleNet
// prototxts were written for. Both compute what Convolution computes; only the parameters differ:
//   ConvolutionDepthwise (the conv_dw_layer of the MobileNet/ShuffleNet forks): one filter per
//     input channel, always: group and num_output are taken from the bottom's channel count C
//     (given values that differ are ignored with a warning, as that layer ignores them). Top
//     (N, C, out...), weights (C, 1, kernel...), bias (C).
//   DepthwiseConvolution (the DepthwiseConvolution fork, a Convolution subclass with its own GPU
//     kernel): exactly Convolution's parameters; prototxts set group = num_output = C.
// Params: convolution_param, as Convolution. Not in-place.
// GPU: Convolution's GPU path, where 2-D depthwise geometries (group == C, num_output a multiple
// of C) run crema's direct kernels or cuDNN, whichever is faster per direction.
#include "layers/convolution/convolution_layer.hpp"

namespace crema {

class ConvolutionDepthwiseLayer final : public ConvolutionLayer {
 public:
  using ConvolutionLayer::ConvolutionLayer;
  const char* type() const override { return "ConvolutionDepthwise"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
};

class DepthwiseConvolutionLayer final : public ConvolutionLayer {
 public:
  using ConvolutionLayer::ConvolutionLayer;
  const char* type() const override { return "DepthwiseConvolution"; }
};

}  // namespace crema
