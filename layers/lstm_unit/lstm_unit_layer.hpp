#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// One LSTM step for N streams of D cells. The gate pre-activations X = [i', f', o', g'] (4D per
// stream, in that order) give
//   i = sigmoid(i'), f = cont * sigmoid(f') (0 when cont == 0), o = sigmoid(o'), g = tanh(g'),
//   c = f * c_prev + i * g,  h = o * tanh(c).
// Shapes: bottom[0] c_prev (1 x N x D), bottom[1] X (1 x N x 4D), bottom[2] cont (1 x N);
// top[0] c, top[1] h (1 x N x D).
// Backward: to c_prev and X (Caffe's formulas, f' using f (1 - f)); none to cont.
// Params: none.
class LSTMUnitLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LSTMUnit"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  int hidden_dim_ = 0;

  CREMA_LAYER_GPU_KERNELS;
};

// The step's math, shared with the LSTM layer and the GPU kernels (one element (n, d) per call).
// Activations are evaluated in double, as Caffe's helpers do.
namespace lstm_unit {

CREMA_HOST_DEVICE inline double Sigmoid(double x) { return 1. / (1. + std::exp(-x)); }
CREMA_HOST_DEVICE inline double Tanh(double x) { return 2. * Sigmoid(2. * x) - 1.; }

template <typename T>
struct Gates {
  T i, f, o, g;
};

// The gates of cell d of the stream whose pre-activations start at xn.
template <typename T>
CREMA_HOST_DEVICE inline Gates<T> GatesOf(const T* xn, int dim, int d, T cont) {
  return {static_cast<T>(Sigmoid(xn[d])),
          cont == 0 ? T(0) : static_cast<T>(cont * Sigmoid(xn[dim + d])),
          static_cast<T>(Sigmoid(xn[2 * dim + d])), static_cast<T>(Tanh(xn[3 * dim + d]))};
}

template <typename T>
CREMA_HOST_DEVICE inline void ForwardAt(int n, int dim, int d, const T* c_prev, const T* x,
                                        const T* cont, T* c, T* h) {
  const Gates<T> gate = GatesOf(x + int64_t{n} * 4 * dim, dim, d, cont[n]);
  const int64_t at = int64_t{n} * dim + d;
  const T cell = gate.f * c_prev[at] + gate.i * gate.g;
  c[at] = cell;
  h[at] = gate.o * static_cast<T>(Tanh(cell));
}

template <typename T>
CREMA_HOST_DEVICE inline void BackwardAt(int n, int dim, int d, const T* c_prev, const T* x,
                                         const T* cont, const T* c, const T* c_diff,
                                         const T* h_diff, T* c_prev_diff, T* x_diff) {
  const Gates<T> gate = GatesOf(x + int64_t{n} * 4 * dim, dim, d, cont[n]);
  const T i = gate.i, f = gate.f, o = gate.o, g = gate.g;
  const int64_t at = int64_t{n} * dim + d;
  const T tanh_c = static_cast<T>(Tanh(c[at]));
  const T c_term_diff = c_diff[at] + h_diff[at] * o * (1 - tanh_c * tanh_c);
  if (c_prev_diff) c_prev_diff[at] = c_term_diff * f;
  if (x_diff) {
    T* dxn = x_diff + int64_t{n} * 4 * dim;
    dxn[d] = c_term_diff * g * i * (1 - i);
    dxn[dim + d] = c_term_diff * c_prev[at] * f * (1 - f);
    dxn[2 * dim + d] = h_diff[at] * tanh_c * o * (1 - o);
    dxn[3 * dim + d] = c_term_diff * i * (1 - g * g);
  }
}

template <typename T>
void Forward(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c, T* h) {
  for (int n = 0; n < num; ++n)
    for (int d = 0; d < dim; ++d) ForwardAt(n, dim, d, c_prev, x, cont, c, h);
}

// c_diff and h_diff are the gradients of c and h; writes c_prev_diff and x_diff where non-null.
template <typename T>
void Backward(int num, int dim, const T* c_prev, const T* x, const T* cont, const T* c,
              const T* c_diff, const T* h_diff, T* c_prev_diff, T* x_diff) {
  for (int n = 0; n < num; ++n)
    for (int d = 0; d < dim; ++d)
      BackwardAt(n, dim, d, c_prev, x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
}

#ifdef CREMA_WITH_CUDA
// Forward and Backward on the device (lstm_unit_layer.cu), one thread per cell running
// ForwardAt/BackwardAt, on the crema stream; device pointers. Used by LSTMUnit and LSTM.
template <typename T>
void ForwardGpu(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c, T* h);
template <typename T>
void BackwardGpu(int num, int dim, const T* c_prev, const T* x, const T* cont, const T* c,
                 const T* c_diff, const T* h_diff, T* c_prev_diff, T* x_diff);
#endif

}  // namespace lstm_unit
}  // namespace crema
