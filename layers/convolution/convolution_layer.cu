#include <glog/logging.h>

#include "layers/convolution/convolution_layer.hpp"
#include "layers/convolution/cudnn_convolution.hpp"

namespace crema {
namespace {

CudnnConvGeometry Geometry(const Blob& bottom, const Blob& top, const Blob& weight,
                           const std::vector<int>& pad, const std::vector<int>& stride,
                           const std::vector<int>& dilation, int group) {
  CudnnConvGeometry g;
  g.input = bottom.shape();
  g.output = top.shape();
  g.filter = weight.shape();
  g.pad = pad;
  g.stride = stride;
  g.dilation = dilation;
  g.group = group;
  g.dtype = bottom.dtype();
  return g;
}

}  // namespace

// cuDNN takes 1 to 3 spatial axes right after (N, C), and a kernel that fits the padded input;
// Caffe also allows a larger kernel (the output size then truncates towards zero).
bool ConvolutionLayer::CudnnFits() const {
  if (!CudnnConvolution::Supports(channel_axis_, num_spatial_axes_)) return false;
  for (int i = 0; i < num_spatial_axes_; ++i)
    if (input_shape(i) + 2 * pad_[i] < dilation_[i] * (kernel_shape_[i] - 1) + 1) return false;
  return true;
}

void ConvolutionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (!CudnnFits()) {
    LOG_FIRST_N(WARNING, 1) << "Convolution " << name()
                            << ": this geometry runs on the CPU (cuDNN takes 1 to 3 spatial axes "
                               "after N, C and a kernel no larger than the padded input)";
    ForwardCpu(bottom, top);
    return;
  }
  if (!cudnn_) cudnn_ = std::make_shared<CudnnConvolution>();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* weight = blobs_[0]->gpu_data<T>();
    const T* bias = bias_term_ ? blobs_[1]->gpu_data<T>() : nullptr;
    for (size_t i = 0; i < bottom.size(); ++i) {
      cudnn_->Prepare(Geometry(*bottom[i], *top[i], *blobs_[0], pad_, stride_, dilation_, group_));
      cudnn_->Forward(bottom[i]->gpu_data<T>(), weight, bias, top[i]->mutable_gpu_data<T>());
    }
  });
}

void ConvolutionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                   const BlobVec& bottom) {
  if (!CudnnFits()) {
    BackwardCpu(top, propagate_down, bottom);
    return;
  }
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    for (size_t i = 0; i < top.size(); ++i) {
      cudnn_->Prepare(Geometry(*bottom[i], *top[i], *blobs_[0], pad_, stride_, dilation_, group_));
      if (weight_down || bias_down)
        cudnn_->BackwardFilter(bottom[i]->gpu_data<T>(), top[i]->gpu_diff<T>(),
                               weight_down ? blobs_[0]->mutable_gpu_diff<T>() : nullptr,
                               bias_down ? blobs_[1]->mutable_gpu_diff<T>() : nullptr);
      if (propagate_down[i])
        cudnn_->BackwardData(top[i]->gpu_diff<T>(), blobs_[0]->gpu_data<T>(),
                             bottom[i]->mutable_gpu_diff<T>());
    }
  });
}

}  // namespace crema
