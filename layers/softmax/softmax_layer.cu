#include "layers/softmax/softmax_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// One thread per (outer, inner) position, looping over the channels; in place safe (each x is
// read before its y is written).
template <typename T>
__global__ void SoftmaxForward(int64_t outer, int64_t channels, int64_t inner, const T* x, T* y) {
  CREMA_CUDA_KERNEL_LOOP(index, outer * inner) {
    const int64_t i = index / inner;
    const int64_t k = index % inner;
    const T* xs = x + i * channels * inner + k;
    T* ys = y + i * channels * inner + k;
    T m = xs[0];
    for (int64_t c = 1; c < channels; ++c) m = max(m, xs[c * inner]);
    T sum = 0;
    for (int64_t c = 0; c < channels; ++c) {
      const T e = exp(xs[c * inner] - m);
      ys[c * inner] = e;
      sum += e;
    }
    for (int64_t c = 0; c < channels; ++c) ys[c * inner] /= sum;
  }
}

template <typename T>
__global__ void SoftmaxBackward(int64_t outer, int64_t channels, int64_t inner, const T* y,
                                const T* dy, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, outer * inner) {
    const int64_t i = index / inner;
    const int64_t k = index % inner;
    const int64_t base = i * channels * inner + k;
    T dot = 0;
    for (int64_t c = 0; c < channels; ++c) dot += dy[base + c * inner] * y[base + c * inner];
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t j = base + c * inner;
      dx[j] = (dy[j] - dot) * y[j];
    }
  }
}

}  // namespace

void SoftmaxLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = outer_num_ * inner_num_;
  if (n == 0 || channels_ == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    SoftmaxForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        outer_num_, channels_, inner_num_, bottom[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("Softmax forward");
}

void SoftmaxLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  const int64_t n = outer_num_ * inner_num_;
  if (!propagate_down[0] || n == 0 || channels_ == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    SoftmaxBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        outer_num_, channels_, inner_num_, top[0]->gpu_data<T>(), top[0]->gpu_diff<T>(),
        bottom[0]->mutable_gpu_diff<T>());
  });
  gpu::CheckLaunch("Softmax backward");
}

}  // namespace crema
