#include "layers/bias/bias_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// y = x + b[(index / inner) % bias_dim]; in place safe.
template <typename T>
__global__ void BiasForward(int64_t n, const T* x, const T* bias, int64_t bias_dim,
                            int64_t inner_dim, T* y) {
  CREMA_CUDA_KERNEL_LOOP(index, n) { y[index] = x[index] + bias[(index / inner_dim) % bias_dim]; }
}

}  // namespace

void BiasLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* bias = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->gpu_data<T>();
    BiasForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, bottom[0]->gpu_data<T>(), bias, bias_dim_, inner_dim_, top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("Bias forward");
}

void BiasLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    const bool learned = bottom.size() == 1;
    // A learned bias accumulates (the solver clears it); bottom[1]'s diff is written.
    if (learned ? param_propagate_down(0) : propagate_down[1])
      gpu::ReduceByAxis<T>(outer_dim_, bias_dim_, inner_dim_, top_diff, nullptr, learned,
                      (learned ? blobs_[0].get() : bottom[1])->mutable_gpu_diff<T>());
    if (propagate_down[0] && top[0] != bottom[0])
      gpu::Copy<T>(top[0]->count(), top_diff, bottom[0]->mutable_gpu_diff<T>());
  });
}

}  // namespace crema
