#pragma once
// GPU math (built when CREMA_WITH_CUDA): cuBLAS for BLAS, small kernels for the rest. Every call
// runs on the calling thread's current device, on that device's crema stream.
#ifdef CREMA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "math/math.hpp"

namespace crema::gpu {

// The stream and cuBLAS handle of the current device (created on first use, bound together).
cudaStream_t Stream();
cublasHandle_t CublasHandle();
// Throws RuntimeError naming `what` and the CUDA/cuBLAS error.
void Check(cudaError_t status, const char* what);
void Check(cublasStatus_t status, const char* what);

using cpu::Trans;
// Row-major, as cpu::Gemm.
template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, const T* b,
          T beta, T* c);
template <typename T>
void Gemv(Trans trans_a, int m, int n, T alpha, const T* a, const T* x, T beta, T* y);
template <typename T>
void Axpy(int64_t n, T alpha, const T* x, T* y);
template <typename T>
void Scal(int64_t n, T alpha, T* x);
template <typename T>
void Set(int64_t n, T value, T* y);
template <typename T>
T Dot(int64_t n, const T* x, const T* y);
template <typename T>
T Asum(int64_t n, const T* x);

}  // namespace crema::gpu

#define CREMA_CUDA_CHECK(expr) ::crema::gpu::Check((expr), #expr)
#define CREMA_CUDA_KERNEL_LOOP(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

namespace crema::gpu {
constexpr int kThreads = 256;
inline int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}
}  // namespace crema::gpu
#endif  // CREMA_WITH_CUDA
