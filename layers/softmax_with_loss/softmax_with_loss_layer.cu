#include <cfloat>

#include "layers/softmax_with_loss/softmax_with_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Per position: the loss and whether it counts; a label out of range is recorded in *bad.
template <typename T>
__global__ void LossForward(int64_t n, int64_t channels, int64_t inner, const T* prob,
                            const T* label, bool has_ignore, int ignore, T* loss, T* counts,
                            double* bad) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int64_t i = index / inner;
    const int64_t j = index % inner;
    const int value = LabelIndex(label[index]);
    if ((has_ignore && value == ignore) || value < 0 || value >= channels) {
      if (!(has_ignore && value == ignore)) *bad = static_cast<double>(index + 1);
      loss[index] = 0;
      counts[index] = 0;
    } else {
      const T p = prob[(i * channels + value) * inner + j];
      loss[index] = -log(max(p, static_cast<T>(FLT_MIN)));
      counts[index] = 1;
    }
  }
}

template <typename T>
__global__ void LossBackward(int64_t n, int64_t channels, int64_t inner, const T* label,
                             bool has_ignore, int ignore, T* dx, T* counts) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int64_t i = index / inner;
    const int64_t j = index % inner;
    const int value = LabelIndex(label[index]);
    if ((has_ignore && value == ignore) || value < 0 || value >= channels) {
      for (int64_t c = 0; c < channels; ++c) dx[(i * channels + c) * inner + j] = 0;
      counts[index] = 0;
    } else {
      dx[(i * channels + value) * inner + j] -= 1;
      counts[index] = 1;
    }
  }
}

}  // namespace

void SoftmaxWithLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const int64_t n = outer_num_ * inner_num_;
  const int64_t channels = prob_.shape(axis_);
  if (bad_label_.count() != 1) bad_label_.Reshape(std::vector<int>{1});
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    // Scratch: bottom[0]'s diff holds the losses and prob_'s diff the counts, as in Caffe; the
    // backward pass overwrites both.
    T* loss = bottom[0]->mutable_gpu_diff<T>();
    T* counts = prob_.mutable_gpu_diff<T>();
    double* bad = bad_label_.mutable_gpu_data<double>();
    gpu::Set<double>(1, 0.0, bad);
    LossForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, channels, inner_num_, prob_.gpu_data<T>(), bottom[1]->gpu_data<T>(), has_ignore_label_,
        ignore_label_, loss, counts, bad);
    gpu::CheckLaunch("SoftmaxWithLoss forward");
    const double total = gpu::Asum<T>(n, loss);
    const double valid = normalization_ == LossParameter::VALID ? gpu::Asum<T>(n, counts) : 0;
    const double bad_at = bad_label_.cpu_data<double>()[0];
    if (bad_at != 0) {
      const int64_t index = static_cast<int64_t>(bad_at) - 1;
      BadLabel(index, bottom[1]->cpu_data<T>()[index]);
    }
    top[0]->mutable_cpu_data<T>()[0] =
        static_cast<T>(total / Normalizer(static_cast<int64_t>(valid)));
  });
  if (top.size() == 2) top[1]->ShareData(prob_);
}

void SoftmaxWithLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the label input (bottom[1])");
  if (!propagate_down[0]) return;
  const int64_t n = outer_num_ * inner_num_;
  const int64_t channels = prob_.shape(axis_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    gpu::Copy<T>(prob_.count(), prob_.gpu_data<T>(), dx);
    T* counts = prob_.mutable_gpu_diff<T>();
    LossBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, channels, inner_num_, bottom[1]->gpu_data<T>(), has_ignore_label_, ignore_label_, dx,
        counts);
    gpu::CheckLaunch("SoftmaxWithLoss backward");
    const double valid = normalization_ == LossParameter::VALID ? gpu::Asum<T>(n, counts) : 0;
    const T loss_weight =
        static_cast<T>(top[0]->cpu_diff<T>()[0] / Normalizer(static_cast<int64_t>(valid)));
    gpu::Scal<T>(prob_.count(), loss_weight, dx);
  });
}

}  // namespace crema
