#include "layers/relu/relu_layer.hpp"
#include "math/channel_gpu.cuh"

namespace crema {
namespace {

template <typename T>
__global__ void ReLUForward(int64_t n, const T* x, T* y, T negative_slope) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = gpu::ReLUForwardValue(x[i], negative_slope); }
}

// In place, x is y, which has the sign of x (for a slope >= 0, as in Caffe).
template <typename T>
__global__ void ReLUBackward(int64_t n, const T* x, const T* dy, T* dx, T negative_slope) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { dx[i] = gpu::ReLUBackwardValue(dy[i], x[i], negative_slope); }
}

}  // namespace

void ReLULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T slope = static_cast<T>(layer_param_.relu_param().negative_slope());
    ReLUForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, bottom[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>(), slope);
  });
  gpu::CheckLaunch("ReLU forward");
}

void ReLULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T slope = static_cast<T>(layer_param_.relu_param().negative_slope());
    ReLUBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, bottom[0]->gpu_data<T>(), top[0]->gpu_diff<T>(), bottom[0]->mutable_gpu_diff<T>(),
        slope);
  });
  gpu::CheckLaunch("ReLU backward");
}

}  // namespace crema
