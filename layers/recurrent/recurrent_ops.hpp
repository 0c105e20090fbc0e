#pragma once
// The device policies of the recurrent step drivers. RecurrentLayer, LSTMLayer and RNNLayer write
// each step once, as a template over a policy: CpuOps runs on the host, GpuOps (CUDA builds) on
// the current device's crema stream. Both compute the same values in the same order: element-wise
// steps in T, sums over rows in row order in T (the CPU loops), matrix products through
// cpu::Gemm / gpu::Gemm (cuBLAS). GpuOps' kernels are in recurrent_layer.cu (shared steps),
// lstm_layer.cu (the LSTM unit) and rnn_layer.cu (tanh).
#include <cmath>
#include <cstdint>

#include "crema/blob.hpp"
#include "layers/lstm_unit/lstm_unit_layer.hpp"
#include "math/math.hpp"
#ifdef CREMA_WITH_CUDA
#include "math/math_gpu.hpp"
#endif

namespace crema::recurrent {

struct CpuOps {
  template <typename T>
  static const T* Data(const Blob& b) {
    return b.cpu_data<T>();
  }
  template <typename T>
  static const T* Diff(const Blob& b) {
    return b.cpu_diff<T>();
  }
  template <typename T>
  static T* MutableData(Blob* b) {
    return b->mutable_cpu_data<T>();
  }
  template <typename T>
  static T* MutableDiff(Blob* b) {
    return b->mutable_cpu_diff<T>();
  }
  template <typename T>
  static void Gemm(cpu::Trans trans_a, cpu::Trans trans_b, int m, int n, int k, T alpha, const T* a,
                   const T* b, T beta, T* c) {
    cpu::Gemm<T>(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  template <typename T>
  static void Copy(int64_t n, const T* x, T* y) {
    cpu::Copy<T>(n, x, y);
  }
  template <typename T>
  static void Set(int64_t n, T value, T* y) {
    cpu::Set<T>(n, value, y);
  }
  // y = a + b element-wise (y may be a).
  template <typename T>
  static void Add(int64_t n, const T* a, const T* b, T* y) {
    cpu::Add<T>(n, a, b, y);
  }
  // y[r][c] = x[r][c] * scale[r] (y may be x): cont_t h_{t-1} and its gradient.
  template <typename T>
  static void ScaleRows(int rows, int cols, const T* x, const T* scale, T* y) {
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[int64_t{r} * cols + c] = x[int64_t{r} * cols + c] * scale[r];
  }
  // y[r][c] += v[c]: a bias added to every row.
  template <typename T>
  static void AddToRows(int64_t rows, int cols, const T* v, T* y) {
    for (int64_t r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[r * cols + c] += v[c];
  }
  // y[c] += x[0][c] + x[1][c] + ..., in row order: bias gradients and sums over steps.
  template <typename T>
  static void SumRows(int64_t rows, int64_t cols, const T* x, T* y) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[c] += x[r * cols + c];
  }
  // y = tanh(x) (y may be x).
  template <typename T>
  static void Tanh(int64_t n, const T* x, T* y) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
  }
  // dx = dy (1 - y^2): through y = tanh(x).
  template <typename T>
  static void TanhBackward(int64_t n, const T* dy, const T* y, T* dx) {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1 - y[i] * y[i]);
  }
  // One LSTMUnit step (layers/lstm_unit): lstm_unit::Forward and Backward.
  template <typename T>
  static void LSTMUnitForward(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c,
                              T* h) {
    lstm_unit::Forward<T>(num, dim, c_prev, x, cont, c, h);
  }
  template <typename T>
  static void LSTMUnitBackward(int num, int dim, const T* c_prev, const T* x, const T* cont,
                               const T* c, const T* c_diff, const T* h_diff, T* c_prev_diff,
                               T* x_diff) {
    lstm_unit::Backward<T>(num, dim, c_prev, x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
  }
};

#ifdef CREMA_WITH_CUDA
// The same steps as CpuOps, on device pointers. Every member is asynchronous on gpu::Stream().
struct GpuOps {
  template <typename T>
  static const T* Data(const Blob& b) {
    return b.gpu_data<T>();
  }
  template <typename T>
  static const T* Diff(const Blob& b) {
    return b.gpu_diff<T>();
  }
  template <typename T>
  static T* MutableData(Blob* b) {
    return b->mutable_gpu_data<T>();
  }
  template <typename T>
  static T* MutableDiff(Blob* b) {
    return b->mutable_gpu_diff<T>();
  }
  template <typename T>
  static void Gemm(cpu::Trans trans_a, cpu::Trans trans_b, int m, int n, int k, T alpha, const T* a,
                   const T* b, T beta, T* c) {
    gpu::Gemm<T>(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  template <typename T>
  static void Copy(int64_t n, const T* x, T* y) {
    gpu::Copy<T>(n, x, y);
  }
  template <typename T>
  static void Set(int64_t n, T value, T* y) {
    gpu::Set<T>(n, value, y);
  }
  template <typename T>
  static void Add(int64_t n, const T* a, const T* b, T* y) {
    gpu::Add<T>(n, a, b, y);
  }
  // recurrent_layer.cu
  template <typename T>
  static void ScaleRows(int rows, int cols, const T* x, const T* scale, T* y);
  template <typename T>
  static void AddToRows(int64_t rows, int cols, const T* v, T* y);
  template <typename T>
  static void SumRows(int64_t rows, int64_t cols, const T* x, T* y);
  // rnn_layer.cu
  template <typename T>
  static void Tanh(int64_t n, const T* x, T* y);
  template <typename T>
  static void TanhBackward(int64_t n, const T* dy, const T* y, T* dx);
  // lstm_layer.cu
  template <typename T>
  static void LSTMUnitForward(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c,
                              T* h);
  template <typename T>
  static void LSTMUnitBackward(int num, int dim, const T* c_prev, const T* x, const T* cont,
                               const T* c, const T* c_diff, const T* h_diff, T* c_prev_diff,
                               T* x_diff);
};
#endif

}  // namespace crema::recurrent
