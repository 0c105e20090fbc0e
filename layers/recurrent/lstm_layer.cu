#include "layers/recurrent/lstm_layer.hpp"
#include "layers/recurrent/recurrent_ops.hpp"

namespace crema {
namespace recurrent {
namespace {

// lstm_unit::Sigmoid and Tanh (layers/lstm_unit) on the device: in double, tanh through the
// sigmoid, as Caffe's helpers.
__device__ inline double Sigmoid(double x) { return 1. / (1. + exp(-x)); }
__device__ inline double Tanh(double x) { return 2. * Sigmoid(2. * x) - 1.; }

// The gates of cell d of the stream whose pre-activations start at xn (i, f, o, g at xn[d],
// xn[dim + d], xn[2 dim + d], xn[3 dim + d]); f is 0 where cont is 0. As lstm_unit's loops.
template <typename T>
struct Gates {
  T i, f, o, g;
};
template <typename T>
__device__ inline Gates<T> GatesOf(const T* xn, int64_t dim, int64_t d, T cont) {
  return {static_cast<T>(Sigmoid(xn[d])),
          cont == 0 ? T(0) : static_cast<T>(cont * Sigmoid(xn[dim + d])),
          static_cast<T>(Sigmoid(xn[2 * dim + d])), static_cast<T>(Tanh(xn[3 * dim + d]))};
}

// One thread per cell (n, d) of lstm_unit::Forward.
template <typename T>
__global__ void LSTMUnitForwardKernel(int64_t count, int dim, const T* c_prev, const T* x,
                                      const T* cont, T* c, T* h) {
  CREMA_CUDA_KERNEL_LOOP(at, count) {
    const int64_t n = at / dim;
    const Gates<T> gate = GatesOf(x + n * 4 * dim, dim, at % dim, cont[n]);
    const T cell = gate.f * c_prev[at] + gate.i * gate.g;
    c[at] = cell;
    h[at] = gate.o * static_cast<T>(Tanh(cell));
  }
}

// One thread per cell of lstm_unit::Backward, writing c_prev_diff[n][d] and the four gate
// gradients of the cell (the LSTM layer always asks for both).
template <typename T>
__global__ void LSTMUnitBackwardKernel(int64_t count, int dim, const T* c_prev, const T* x,
                                       const T* cont, const T* c, const T* c_diff, const T* h_diff,
                                       T* c_prev_diff, T* x_diff) {
  CREMA_CUDA_KERNEL_LOOP(at, count) {
    const int64_t n = at / dim, d = at % dim;
    const Gates<T> gate = GatesOf(x + n * 4 * dim, dim, d, cont[n]);
    const T i = gate.i, f = gate.f, o = gate.o, g = gate.g;
    const T tanh_c = static_cast<T>(Tanh(c[at]));
    const T c_term_diff = c_diff[at] + h_diff[at] * o * (1 - tanh_c * tanh_c);
    c_prev_diff[at] = c_term_diff * f;
    T* dxn = x_diff + n * 4 * dim;
    dxn[d] = c_term_diff * g * i * (1 - i);
    dxn[dim + d] = c_term_diff * c_prev[at] * f * (1 - f);
    dxn[2 * dim + d] = h_diff[at] * tanh_c * o * (1 - o);
    dxn[3 * dim + d] = c_term_diff * i * (1 - g * g);
  }
}

}  // namespace

template <typename T>
void GpuOps::LSTMUnitForward(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c,
                             T* h) {
  const int64_t count = int64_t{num} * dim;
  if (count == 0) return;
  LSTMUnitForwardKernel<T>
      <<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(count, dim, c_prev, x, cont, c, h);
  gpu::CheckLaunch("LSTM unit forward");
}

template <typename T>
void GpuOps::LSTMUnitBackward(int num, int dim, const T* c_prev, const T* x, const T* cont,
                              const T* c, const T* c_diff, const T* h_diff, T* c_prev_diff,
                              T* x_diff) {
  const int64_t count = int64_t{num} * dim;
  if (count == 0) return;
  LSTMUnitBackwardKernel<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
      count, dim, c_prev, x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
  gpu::CheckLaunch("LSTM unit backward");
}

#define CREMA_INSTANTIATE_LSTM_UNIT(T)                                                        \
  template void GpuOps::LSTMUnitForward<T>(int, int, const T*, const T*, const T*, T*, T*);   \
  template void GpuOps::LSTMUnitBackward<T>(int, int, const T*, const T*, const T*, const T*, \
                                            const T*, const T*, T*, T*);
CREMA_INSTANTIATE_LSTM_UNIT(float)
CREMA_INSTANTIATE_LSTM_UNIT(double)
#undef CREMA_INSTANTIATE_LSTM_UNIT

}  // namespace recurrent

// The steps of ForwardCpu/BackwardCpu (lstm_layer.cpp) with the device policy.
void LSTMLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T, recurrent::GpuOps>(bottom, top));
}

void LSTMLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T, recurrent::GpuOps>(top, propagate_down, bottom));
}

}  // namespace crema
