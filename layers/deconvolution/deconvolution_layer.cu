#include <glog/logging.h>

#include "layers/convolution/cudnn_convolution.hpp"
#include "layers/deconvolution/deconvolution_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Deconvolution is the convolution whose input is the deconvolution's top and whose output is
// its bottom: the weights (C, num_output / group, kernel...) are that convolution's filter
// (K = C outputs, num_output / group inputs per group). Then
//   deconv forward        = conv backward-data (dy = bottom, dx = top),
//   deconv backward-data  = conv forward (x = top diff, y = bottom diff),
//   deconv weight grad    = conv backward-filter (x = top diff, dy = bottom).
CudnnConvGeometry DeconvGeometry(const Blob& bottom, const Blob& top, const Blob& weight,
                                 const std::vector<int>& pad, const std::vector<int>& stride,
                                 const std::vector<int>& dilation, int group) {
  CudnnConvGeometry g;
  g.input = top.shape();
  g.output = bottom.shape();
  g.filter = weight.shape();
  g.pad = pad;
  g.stride = stride;
  g.dilation = dilation;
  g.group = group;
  g.dtype = bottom.dtype();
  return g;
}

}  // namespace

void DeconvolutionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (!CudnnConvolution::Supports(channel_axis_, num_spatial_axes_)) {
    LOG_FIRST_N(WARNING, 1) << "Deconvolution " << name() << ": " << num_spatial_axes_
                            << " spatial axes with channel axis " << channel_axis_
                            << " run on the CPU (cuDNN takes 1 to 3 spatial axes after N, C)";
    ForwardCpu(bottom, top);
    return;
  }
  if (!cudnn_) cudnn_ = std::make_shared<CudnnConvolution>();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* weight = blobs_[0]->gpu_data<T>();
    for (size_t i = 0; i < bottom.size(); ++i) {
      cudnn_->Prepare(
          DeconvGeometry(*bottom[i], *top[i], *blobs_[0], pad_, stride_, dilation_, group_));
      T* top_data = top[i]->mutable_gpu_data<T>();
      cudnn_->BackwardData(bottom[i]->gpu_data<T>(), weight, top_data);
      if (bias_term_)
        gpu::AddChannelBias<T>(num_, num_output_, out_spatial_dim_, blobs_[1]->gpu_data<T>(), false,
                               T(0), top_data);
    }
  });
}

void DeconvolutionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  if (!CudnnConvolution::Supports(channel_axis_, num_spatial_axes_)) {
    BackwardCpu(top, propagate_down, bottom);
    return;
  }
  if (!cudnn_) cudnn_ = std::make_shared<CudnnConvolution>();
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    for (size_t i = 0; i < top.size(); ++i) {
      const T* top_diff = top[i]->gpu_diff<T>();
      if (bias_down)
        gpu::ReduceByAxis<T>(num_, num_output_, out_spatial_dim_, top_diff, nullptr, true,
                             blobs_[1]->mutable_gpu_diff<T>());
      if (!weight_down && !propagate_down[i]) continue;
      cudnn_->Prepare(
          DeconvGeometry(*bottom[i], *top[i], *blobs_[0], pad_, stride_, dilation_, group_));
      // The weight gradient accumulates (beta = 1 in CudnnConvolution::BackwardFilter).
      if (weight_down)
        cudnn_->BackwardFilter(top_diff, bottom[i]->gpu_data<T>(),
                               blobs_[0]->mutable_gpu_diff<T>());
      if (propagate_down[i])
        cudnn_->Forward(top_diff, blobs_[0]->gpu_data<T>(), bottom[i]->mutable_gpu_diff<T>());
    }
  });
}

}  // namespace crema
