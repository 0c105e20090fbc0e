#include "layers/sigmoid_cross_entropy_loss/sigmoid_cross_entropy_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Per element, in double as the CPU: the stable cross-entropy and whether the element counts.
template <typename T>
__global__ void ElementLosses(int64_t count, const T* input, const T* target, bool has_ignore,
                              int ignore, double* loss, double* counts) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    if (has_ignore && LabelIndex(target[i]) == ignore) {
      loss[i] = 0;
      counts[i] = 0;
    } else {
      const double x = input[i];
      const double positive = x >= 0 ? 1.0 : 0.0;
      loss[i] = -(x * (target[i] - positive) - log1p(exp(x - 2 * x * positive)));
      counts[i] = 1;
    }
  }
}

template <typename T>
__global__ void ElementGradients(int64_t count, const T* input, const T* target, bool has_ignore,
                                 int ignore, T scale, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    if (has_ignore && LabelIndex(target[i]) == ignore) {
      dx[i] = 0;
    } else {
      const T sigmoid = T(0.5) * tanh(T(0.5) * input[i]) + T(0.5);
      dx[i] = scale * (sigmoid - target[i]);
    }
  }
}

}  // namespace

void SigmoidCrossEntropyLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  double* loss = losses_.mutable_gpu_data<double>();
  double* counts = counts_.mutable_gpu_data<double>();
  double* sums = sums_.mutable_gpu_data<double>();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    ElementLosses<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), has_ignore_label_, ignore_label_,
        loss, counts);
    gpu::CheckLaunch("SigmoidCrossEntropyLoss forward");
  });
  gpu::ReduceByAxis<double>(1, 1, count, loss, nullptr, false, sums);
  gpu::ReduceByAxis<double>(1, 1, count, counts, nullptr, false, sums + 1);
  const double* host = sums_.cpu_data<double>();
  normalizer_ = Normalizer(static_cast<int64_t>(host[1]));
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(host[0] / normalizer_);
  });
}

void SigmoidCrossEntropyLossLayer::BackwardGpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T scale = static_cast<T>(top[0]->cpu_diff<T>()[0] / normalizer_);
    ElementGradients<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), has_ignore_label_, ignore_label_,
        scale, bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("SigmoidCrossEntropyLoss backward");
  });
}

}  // namespace crema
