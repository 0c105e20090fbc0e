#include "layers/scale/scale_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

template <typename T>
__global__ void ScaleForward(int64_t n, const T* x, const T* scale, int64_t scale_dim,
                             int64_t inner_dim, const T* bias, int64_t bias_dim,
                             int64_t bias_inner_dim, T* y) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    T value = x[index] * scale[(index / inner_dim) % scale_dim];
    if (bias != nullptr) value += bias[(index / bias_inner_dim) % bias_dim];
    y[index] = value;
  }
}

template <typename T>
__global__ void ScaleBackward(int64_t n, const T* dy, const T* scale, int64_t scale_dim,
                              int64_t inner_dim, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    dx[index] = dy[index] * scale[(index / inner_dim) % scale_dim];
  }
}

}  // namespace

void ScaleLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* scale = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->gpu_data<T>();
    const T* bottom_data = bottom[0]->gpu_data<T>();
    // In place, keep the bottom for the gradient of the scale.
    if (top[0] == bottom[0] && !forward_only())
      gpu::Copy<T>(n, bottom_data, bottom_copy_.mutable_gpu_data<T>());
    const T* bias = bias_term_ ? blobs_[bias_param_id_]->gpu_data<T>() : nullptr;
    if (n > 0) {
      ScaleForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, bottom_data, scale, scale_dim_, inner_dim_, bias, bias_dim_, bias_inner_dim_,
          top[0]->mutable_gpu_data<T>());
      gpu::CheckLaunch("Scale forward");
    }
  });
}

void ScaleLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    // In place, the top diff is the bottom diff: the scale and bias diffs are taken first (the
    // stream orders the kernels).
    if (bias_term_ && param_propagate_down(bias_param_id_))
      gpu::ReduceByAxis<T>(bias_outer_dim_, bias_dim_, bias_inner_dim_, top_diff, nullptr, true,
                           blobs_[bias_param_id_]->mutable_gpu_diff<T>());
    const bool learned = bottom.size() == 1;
    if (learned ? param_propagate_down(0) : propagate_down[1]) {
      const T* bottom_data =
          (top[0] == bottom[0] ? &bottom_copy_ : static_cast<const Blob*>(bottom[0]))
              ->gpu_data<T>();
      // A learned scale accumulates (the solver clears it); bottom[1]'s diff is written.
      gpu::ReduceByAxis<T>(outer_dim_, scale_dim_, inner_dim_, top_diff, bottom_data, learned,
                           (learned ? blobs_[0].get() : bottom[1])->mutable_gpu_diff<T>());
    }
    if (propagate_down[0] && n > 0) {
      const T* scale = (learned ? blobs_[0].get() : bottom[1])->gpu_data<T>();
      ScaleBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, top_diff, scale, scale_dim_, inner_dim_, bottom[0]->mutable_gpu_diff<T>());
      gpu::CheckLaunch("Scale backward");
    }
  });
}

}  // namespace crema
