#include "layers/prelu/prelu_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// c = (i / dim) % channels is the slope of element i; channel_shared passes channels = 1.
template <typename T>
__global__ void PReLUForward(int64_t n, int64_t dim, int64_t channels, const T* x, const T* slope,
                             T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T value = x[i];
    const T positive = value < T(0) ? T(0) : value;  // std::max(x, 0)
    const T negative = T(0) < value ? T(0) : value;  // std::min(x, 0)
    y[i] = positive + slope[(i / dim) % channels] * negative;
  }
}

template <typename T>
__global__ void PReLUBackward(int64_t n, int64_t dim, int64_t channels, const T* x, const T* dy,
                              const T* slope, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * (x[i] > 0 ? T(1) : slope[(i / dim) % channels]); }
}

// x where x <= 0, else 0: dL/da_c is the sum over channel c of dy times this.
template <typename T>
__global__ void NonPositivePart(int64_t n, const T* x, T* out) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { out[i] = x[i] <= 0 ? x[i] : T(0); }
}

}  // namespace

void PReLULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  const int64_t dim = bottom[0]->count(2);
  const int64_t channels = channel_shared_ ? 1 : bottom[0]->shape(1);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* bottom_data = input_.SaveGpu(*bottom[0], *top[0]).gpu_data<T>();
    if (n > 0) {
      PReLUForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, dim, channels, bottom_data, blobs_[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>());
      gpu::CheckLaunch("PReLU forward");
    }
  });
}

void PReLULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  const int64_t dim = bottom[0]->count(2);
  const int64_t channels = channel_shared_ ? 1 : bottom[0]->shape(1);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* bottom_data = input_.GetGpu(*bottom[0], *top[0]).gpu_data<T>();
    const T* top_diff = top[0]->gpu_diff<T>();
    // In place, top_diff is the bottom diff: the slope gradient is taken first (the stream orders
    // the kernels). Summed per channel in double in a fixed order (deterministic).
    if (param_propagate_down(0)) {
      NonPositivePart<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, bottom_data, slope_term_.mutable_gpu_data<T>());
      gpu::CheckLaunch("PReLU slope gradient");
      // Element (o, c, i) of the bottom seen as (n / (channels * dim), channels, dim).
      gpu::ReduceByAxis<T>(n / (channels * dim), channels, dim, top_diff, slope_term_.gpu_data<T>(),
                           true, blobs_[0]->mutable_gpu_diff<T>());
    }
    if (propagate_down[0]) {
      PReLUBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, dim, channels, bottom_data, top_diff, blobs_[0]->gpu_data<T>(),
          bottom[0]->mutable_gpu_diff<T>());
      gpu::CheckLaunch("PReLU backward");
    }
  });
}

}  // namespace crema
