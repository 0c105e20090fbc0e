// The device steps shared by LSTM and RNN (recurrent_ops.hpp, GpuOps): one thread per element
// computing what CpuOps' loop body computes for it.
#include "layers/recurrent/recurrent_ops.hpp"

namespace crema::recurrent {
namespace {

template <typename T>
__global__ void ScaleRowsKernel(int64_t n, int cols, const T* x, const T* scale, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] * scale[i / cols]; }
}

template <typename T>
__global__ void AddToRowsKernel(int64_t n, int cols, const T* v, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] += v[i % cols]; }
}

// One thread per column, adding the rows in order in T, as the CPU loop does (deterministic).
template <typename T>
__global__ void SumRowsKernel(int64_t rows, int64_t cols, const T* x, T* y) {
  CREMA_CUDA_KERNEL_LOOP(c, cols) {
    T sum = y[c];
    for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    y[c] = sum;
  }
}

}  // namespace

template <typename T>
void GpuOps::ScaleRows(int rows, int cols, const T* x, const T* scale, T* y) {
  const int64_t n = int64_t{rows} * cols;
  if (n == 0) return;
  ScaleRowsKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, cols, x, scale, y);
  gpu::CheckLaunch("recurrent cont scaling");
}

template <typename T>
void GpuOps::AddToRows(int64_t rows, int cols, const T* v, T* y) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  AddToRowsKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, cols, v, y);
  gpu::CheckLaunch("recurrent bias");
}

template <typename T>
void GpuOps::SumRows(int64_t rows, int64_t cols, const T* x, T* y) {
  if (cols == 0) return;
  SumRowsKernel<T><<<gpu::Blocks(cols), gpu::kThreads, 0, gpu::Stream()>>>(rows, cols, x, y);
  gpu::CheckLaunch("recurrent row sums");
}

#define CREMA_INSTANTIATE_GPU_OPS(T)                                    \
  template void GpuOps::ScaleRows<T>(int, int, const T*, const T*, T*); \
  template void GpuOps::AddToRows<T>(int64_t, int, const T*, T*);       \
  template void GpuOps::SumRows<T>(int64_t, int64_t, const T*, T*);
CREMA_INSTANTIATE_GPU_OPS(float)
CREMA_INSTANTIATE_GPU_OPS(double)
#undef CREMA_INSTANTIATE_GPU_OPS

}  // namespace crema::recurrent
