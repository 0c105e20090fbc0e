#include "layers/lstm_unit/lstm_unit_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// One thread per cell (n, d), running the CPU's per-element math.
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

namespace lstm_unit {

template <typename T>
void ForwardGpu(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c, T* h) {
  const int64_t n = int64_t{num} * dim;
  if (n == 0) return;
  LSTMUnitForward<T>
      <<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, dim, c_prev, x, cont, c, h);
  gpu::CheckLaunch("LSTM unit forward");
}

template <typename T>
void BackwardGpu(int num, int dim, const T* c_prev, const T* x, const T* cont, const T* c,
                 const T* c_diff, const T* h_diff, T* c_prev_diff, T* x_diff) {
  const int64_t n = int64_t{num} * dim;
  if (n == 0) return;
  LSTMUnitBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
      n, dim, c_prev, x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
  gpu::CheckLaunch("LSTM unit backward");
}

#define CREMA_INSTANTIATE_LSTM_UNIT_GPU(T)                                                 \
  template void ForwardGpu<T>(int, int, const T*, const T*, const T*, T*, T*);             \
  template void BackwardGpu<T>(int, int, const T*, const T*, const T*, const T*, const T*, \
                               const T*, T*, T*);
CREMA_INSTANTIATE_LSTM_UNIT_GPU(float)
CREMA_INSTANTIATE_LSTM_UNIT_GPU(double)
#undef CREMA_INSTANTIATE_LSTM_UNIT_GPU

}  // namespace lstm_unit

void LSTMUnitLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    lstm_unit::ForwardGpu<T>(bottom[0]->shape(1), hidden_dim_, bottom[0]->gpu_data<T>(),
                             bottom[1]->gpu_data<T>(), bottom[2]->gpu_data<T>(),
                             top[0]->mutable_gpu_data<T>(), top[1]->mutable_gpu_data<T>());
  });
}

void LSTMUnitLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (propagate_down[2])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[2])");
  if (!propagate_down[0] && !propagate_down[1]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    lstm_unit::BackwardGpu<T>(bottom[0]->shape(1), hidden_dim_, bottom[0]->gpu_data<T>(),
                              bottom[1]->gpu_data<T>(), bottom[2]->gpu_data<T>(),
                              top[0]->gpu_data<T>(), top[0]->gpu_diff<T>(), top[1]->gpu_diff<T>(),
                              propagate_down[0] ? bottom[0]->mutable_gpu_diff<T>() : nullptr,
                              propagate_down[1] ? bottom[1]->mutable_gpu_diff<T>() : nullptr);
  });
}

}  // namespace crema
