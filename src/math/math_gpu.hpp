#pragma once
// GPU math (built when CREMA_WITH_CUDA): cuBLAS for BLAS, small kernels for the rest, mirroring
// cpu:: in math.hpp. Every call runs on the calling thread's current device, on that device's
// crema stream (core/cuda_context.hpp); none waits for the GPU except those returning a value.
#ifdef CREMA_WITH_CUDA
#include <cstddef>
#include <cstdint>

#include "core/cuda_context.hpp"
#include "math/math.hpp"

namespace crema::gpu {

using cpu::Trans;
// Row-major, as cpu::Gemm.
template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, const T* b,
          T beta, T* c);
// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, the matrices stride_a/b/c elements apart.
template <typename T>
void GemmStridedBatched(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a,
                        int64_t stride_a, const T* b, int64_t stride_b, T beta, T* c,
                        int64_t stride_c, int batch);
template <typename T>
void Gemv(Trans trans_a, int m, int n, T alpha, const T* a, const T* x, T beta, T* y);
template <typename T>
void Axpy(int64_t n, T alpha, const T* x, T* y);
template <typename T>
void Axpby(int64_t n, T alpha, const T* x, T beta, T* y);
template <typename T>
void Scal(int64_t n, T alpha, T* x);
template <typename T>
void Scale(int64_t n, T alpha, const T* x, T* y);
template <typename T>
void Copy(int64_t n, const T* x, T* y);
template <typename T>
void Set(int64_t n, T value, T* y);
template <typename T>
void AddScalar(int64_t n, T alpha, T* y);
// These return to the host, so they wait for the stream.
template <typename T>
T Dot(int64_t n, const T* x, const T* y);
template <typename T>
T Asum(int64_t n, const T* x);
template <typename T>
void Add(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void Sub(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void Mul(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void Div(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void Sqr(int64_t n, const T* a, T* y);
template <typename T>
void Sqrt(int64_t n, const T* a, T* y);
template <typename T>
void Exp(int64_t n, const T* a, T* y);
template <typename T>
void Log(int64_t n, const T* a, T* y);
template <typename T>
void Abs(int64_t n, const T* a, T* y);
template <typename T>
void Powx(int64_t n, const T* a, T b, T* y);
template <typename T>
void Sign(int64_t n, const T* a, T* y);

// out[d] = (accumulate ? out[d] : 0) + sum over o < outer, i < inner of a[k] (times b[k] when b
// is not null), k = (o * dim + d) * inner + i: per-channel sums such as bias and scale gradients.
// Summed in double in a fixed order (deterministic, no atomics).
template <typename T>
void ReduceByAxis(int64_t outer, int64_t dim, int64_t inner, const T* a, const T* b,
                  bool accumulate, T* out);

// *out += the sum of x[k] * y[k], k < n, in order on one thread: the weighted value of a loss
// top (a handful of elements), kept on the device (a CUDA graph's non-finite-loss guard).
template <typename T>
void AddDot(int64_t n, const T* x, const T* y, double* out);

// y[k] += bias[c] for every element k = (o * channels + c) * inner + i (bias may be null), then,
// when relu, y[k] = Caffe's ReLU of it with `negative_slope`, in one pass: the bias of
// convolutions, with a ReLU fused into them.
template <typename T>
void AddChannelBias(int64_t outer, int64_t channels, int64_t inner, const T* bias, bool relu,
                    T negative_slope, T* y);

// y[i] = Caffe's ReLU of y[i] (the twin of math/activation.hpp's ReLUInPlace).
template <typename T>
void ReLUInPlace(int64_t n, T negative_slope, T* y);

// Throws RuntimeError when the last kernel launch failed.
void CheckLaunch(const char* what);

// Scratch memory of the current device shared by every user of one kind: work on a device runs
// one call at a time on its stream, so users never hold it at the same time. At least `bytes`,
// contents undefined, valid until the next request of that kind; grows, never shrinks.
enum class Scratch { kCudnnWorkspace, kReduction };
void* DeviceScratch(Scratch kind, size_t bytes);

}  // namespace crema::gpu

#ifdef __CUDACC__
#define CREMA_CUDA_KERNEL_LOOP(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
#endif

namespace crema::gpu {
constexpr int kThreads = 256;
inline int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}
}  // namespace crema::gpu
#endif  // CREMA_WITH_CUDA
