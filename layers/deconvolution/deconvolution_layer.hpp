#pragma once
// Deconvolution (transposed convolution), as Caffe: the forward pass of Convolution's backward.
// Bottom (batch..., C, spatial...) with C on convolution_param.axis; top (batch..., num_output,
// out...) with out = stride * (in - 1) + dilation * (kernel - 1) + 1 - 2 * pad per spatial axis.
// top = col2im(W^T * bottom) + b; channels split into `group` groups. Weights
// (C, num_output / group, kernel...), bias (num_output). Backward: d bottom = W * im2col(d top),
// d W += im2col(d top) * bottom^T, d b += sum of d top over space and batch.
// Params: convolution_param { num_output, bias_term, kernel_size | kernel_h/_w, pad | pad_h/_w,
// stride | stride_h/_w, dilation, group, axis, force_nd_im2col, weight_filler, bias_filler }.
// Not in-place.
#include <memory>

#include "layers/convolution/base_conv_layer.hpp"

namespace crema {

class CudnnConvolution;

class DeconvolutionLayer final : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Deconvolution"; }

 protected:
  bool reverse_dimensions() const override { return true; }
  void ComputeOutputShape() override;
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                 const BlobVec& bottom);

#ifdef CREMA_WITH_CUDA
  // The cuDNN convolution whose input is this layer's top and whose output is its bottom,
  // created on the first GPU pass.
  std::shared_ptr<CudnnConvolution> cudnn_;
#endif
  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
