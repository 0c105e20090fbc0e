#include <math_constants.h>

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

// One block: the total loss and the valid count in double, in a fixed order; the valid count into
// scalars[1] and the normalized loss into *top (NaN after a label out of range).
constexpr int kReduceThreads = 256;

template <typename T>
__global__ void LossTotal(int64_t n, const T* loss, const T* counts, bool valid_mode,
                          double fixed_normalizer, double* scalars, T* top) {
  __shared__ double totals[kReduceThreads];
  __shared__ double valids[kReduceThreads];
  double total = 0;
  double valid = 0;
  for (int64_t i = threadIdx.x; i < n; i += kReduceThreads) {
    total += loss[i];
    valid += counts[i];
  }
  totals[threadIdx.x] = total;
  valids[threadIdx.x] = valid;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      totals[threadIdx.x] += totals[threadIdx.x + half];
      valids[threadIdx.x] += valids[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    scalars[1] = valids[0];
    // A label out of range makes the loss NaN: CheckForward then reads where it was.
    top[0] =
        scalars[0] != 0
            ? static_cast<T>(CUDART_NAN)
            : static_cast<T>(totals[0] / (valid_mode ? max(1.0, valids[0]) : fixed_normalizer));
  }
}

// dx *= loss weight / normalizer, the loss weight being the top's diff.
template <typename T>
__global__ void ScaleByLossWeight(int64_t n, const T* top_diff, const double* scalars,
                                  bool valid_mode, double fixed_normalizer, T* dx) {
  const T weight =
      static_cast<T>(top_diff[0] / (valid_mode ? max(1.0, scalars[1]) : fixed_normalizer));
  CREMA_CUDA_KERNEL_LOOP(i, n) { dx[i] = weight * dx[i]; }
}

}  // namespace

void SoftmaxWithLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const int64_t n = outer_num_ * inner_num_;
  const int64_t channels = prob_.shape(axis_);
  if (device_scalars_.count() != 2) device_scalars_.Reshape(std::vector<int>{2});
  const bool valid_mode = normalization_ == LossParameter::VALID;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    // Scratch: bottom[0]'s diff holds the losses and prob_'s diff the counts, as in Caffe; the
    // backward pass overwrites both.
    T* loss = bottom[0]->mutable_gpu_diff<T>();
    T* counts = prob_.mutable_gpu_diff<T>();
    double* scalars = device_scalars_.mutable_gpu_data<double>();
    gpu::Set<double>(1, 0.0, scalars);
    LossForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, channels, inner_num_, prob_.gpu_data<T>(), bottom[1]->gpu_data<T>(), has_ignore_label_,
        ignore_label_, loss, counts, scalars);
    gpu::CheckLaunch("SoftmaxWithLoss forward");
    // Kept on the device (no host synchronisation, so a CUDA graph can capture the layer);
    // CheckForward reads the bad-label position afterwards.
    LossTotal<T><<<1, kReduceThreads, 0, gpu::Stream()>>>(
        n, loss, counts, valid_mode, Normalizer(0), scalars, top[0]->mutable_gpu_data<T>());
    gpu::CheckLaunch("SoftmaxWithLoss forward (total)");
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
    ScaleByLossWeight<T><<<gpu::Blocks(prob_.count()), gpu::kThreads, 0, gpu::Stream()>>>(
        prob_.count(), top[0]->gpu_diff<T>(), device_scalars_.gpu_data<double>(),
        normalization_ == LossParameter::VALID, Normalizer(0), dx);
    gpu::CheckLaunch("SoftmaxWithLoss backward (loss weight)");
  });
}

}  // namespace crema
