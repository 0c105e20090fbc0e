#include "layers/recurrent/recurrent_ops.hpp"
#include "layers/recurrent/rnn_layer.hpp"

namespace crema {
namespace recurrent {
namespace {

template <typename T>
__global__ void TanhKernel(int64_t n, const T* x, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = tanh(x[i]); }
}

template <typename T>
__global__ void TanhBackwardKernel(int64_t n, const T* dy, const T* y, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { dx[i] = dy[i] * (1 - y[i] * y[i]); }
}

}  // namespace

template <typename T>
void GpuOps::Tanh(int64_t n, const T* x, T* y) {
  if (n == 0) return;
  TanhKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, x, y);
  gpu::CheckLaunch("RNN tanh");
}

template <typename T>
void GpuOps::TanhBackward(int64_t n, const T* dy, const T* y, T* dx) {
  if (n == 0) return;
  TanhBackwardKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, dy, y, dx);
  gpu::CheckLaunch("RNN tanh backward");
}

template void GpuOps::Tanh<float>(int64_t, const float*, float*);
template void GpuOps::Tanh<double>(int64_t, const double*, double*);
template void GpuOps::TanhBackward<float>(int64_t, const float*, const float*, float*);
template void GpuOps::TanhBackward<double>(int64_t, const double*, const double*, double*);

}  // namespace recurrent

// The steps of ForwardCpu/BackwardCpu (rnn_layer.cpp) with the device policy.
void RNNLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T, recurrent::GpuOps>(bottom, top));
}

void RNNLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T, recurrent::GpuOps>(top, propagate_down, bottom));
}

}  // namespace crema
