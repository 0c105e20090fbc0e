#include "layers/lstm_unit/lstm_unit_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// One thread per cell (n, d), running the CPU's per-element math (lstm_unit::ForwardAt and
// BackwardAt).
template <typename T>
__global__ void LSTMUnitForward(int64_t n, int dim, const T* c_prev, const T* x, const T* cont,
                                T* c, T* h) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    lstm_unit::ForwardAt(static_cast<int>(index / dim), dim, static_cast<int>(index % dim), c_prev,
                         x, cont, c, h);
  }
}

template <typename T>
__global__ void LSTMUnitBackward(int64_t n, int dim, const T* c_prev, const T* x, const T* cont,
                                 const T* c, const T* c_diff, const T* h_diff, T* c_prev_diff,
                                 T* x_diff) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    lstm_unit::BackwardAt(static_cast<int>(index / dim), dim, static_cast<int>(index % dim), c_prev,
                          x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
  }
}

}  // namespace

void LSTMUnitLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    LSTMUnitForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, hidden_dim_, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(),
        bottom[2]->gpu_data<T>(), top[0]->mutable_gpu_data<T>(), top[1]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("LSTMUnit forward");
}

void LSTMUnitLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (propagate_down[2])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[2])");
  const int64_t n = bottom[0]->count();
  if ((!propagate_down[0] && !propagate_down[1]) || n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    LSTMUnitBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, hidden_dim_, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(),
        bottom[2]->gpu_data<T>(), top[0]->gpu_data<T>(), top[0]->gpu_diff<T>(),
        top[1]->gpu_diff<T>(), propagate_down[0] ? bottom[0]->mutable_gpu_diff<T>() : nullptr,
        propagate_down[1] ? bottom[1]->mutable_gpu_diff<T>() : nullptr);
  });
  gpu::CheckLaunch("LSTMUnit backward");
}

}  // namespace crema
