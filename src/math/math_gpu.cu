#include <map>
#include <mutex>

#include "crema/error.hpp"
#include "math/math_gpu.hpp"

namespace crema::gpu {
namespace {

struct DeviceContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

DeviceContext& Context() {
  static std::mutex mutex;
  static std::map<int, DeviceContext> contexts;
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  DeviceContext& ctx = contexts[device];
  if (ctx.stream == nullptr) {
    Check(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cublasCreate(&ctx.cublas), "cublasCreate");
    Check(cublasSetStream(ctx.cublas, ctx.stream), "cublasSetStream");
    // Exact FP32 by default; tensor-core math is an opt-in of the GPU issue.
    Check(cublasSetMathMode(ctx.cublas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  }
  return ctx;
}

cublasOperation_t Op(Trans t) { return t == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T; }

template <typename T>
__global__ void SetKernel(int64_t n, T value, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = value; }
}

}  // namespace

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    CREMA_THROW_RUNTIME(what, " failed: ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ")");
}

void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    CREMA_THROW_RUNTIME(what, " failed: cuBLAS status ", static_cast<int>(status));
}

cudaStream_t Stream() { return Context().stream; }
cublasHandle_t CublasHandle() { return Context().cublas; }

// cuBLAS is column-major: a row-major C = A B is the column-major C^T = B^T A^T.
template <>
void Gemm<float>(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(cublasSgemm(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b, ldb, a, lda,
                    &beta, c, n),
        "cublasSgemm");
}

template <>
void Gemm<double>(Trans trans_a, Trans trans_b, int m, int n, int k, double alpha, const double* a,
                  const double* b, double beta, double* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(cublasDgemm(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b, ldb, a, lda,
                    &beta, c, n),
        "cublasDgemm");
}

template <>
void Gemv<float>(Trans trans_a, int m, int n, float alpha, const float* a, const float* x,
                 float beta, float* y) {
  const cublasOperation_t op = trans_a == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  Check(cublasSgemv(CublasHandle(), op, n, m, &alpha, a, n, x, 1, &beta, y, 1), "cublasSgemv");
}

template <>
void Gemv<double>(Trans trans_a, int m, int n, double alpha, const double* a, const double* x,
                  double beta, double* y) {
  const cublasOperation_t op = trans_a == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  Check(cublasDgemv(CublasHandle(), op, n, m, &alpha, a, n, x, 1, &beta, y, 1), "cublasDgemv");
}

template <>
void Axpy<float>(int64_t n, float alpha, const float* x, float* y) {
  Check(cublasSaxpy_64(CublasHandle(), n, &alpha, x, 1, y, 1), "cublasSaxpy");
}
template <>
void Axpy<double>(int64_t n, double alpha, const double* x, double* y) {
  Check(cublasDaxpy_64(CublasHandle(), n, &alpha, x, 1, y, 1), "cublasDaxpy");
}
template <>
void Scal<float>(int64_t n, float alpha, float* x) {
  Check(cublasSscal_64(CublasHandle(), n, &alpha, x, 1), "cublasSscal");
}
template <>
void Scal<double>(int64_t n, double alpha, double* x) {
  Check(cublasDscal_64(CublasHandle(), n, &alpha, x, 1), "cublasDscal");
}
template <>
float Dot<float>(int64_t n, const float* x, const float* y) {
  float result = 0;
  Check(cublasSdot_64(CublasHandle(), n, x, 1, y, 1, &result), "cublasSdot");
  return result;
}
template <>
double Dot<double>(int64_t n, const double* x, const double* y) {
  double result = 0;
  Check(cublasDdot_64(CublasHandle(), n, x, 1, y, 1, &result), "cublasDdot");
  return result;
}
template <>
float Asum<float>(int64_t n, const float* x) {
  float result = 0;
  Check(cublasSasum_64(CublasHandle(), n, x, 1, &result), "cublasSasum");
  return result;
}
template <>
double Asum<double>(int64_t n, const double* x) {
  double result = 0;
  Check(cublasDasum_64(CublasHandle(), n, x, 1, &result), "cublasDasum");
  return result;
}

template <typename T>
void Set(int64_t n, T value, T* y) {
  if (n == 0) return;
  SetKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(n, value, y);
  Check(cudaGetLastError(), "Set kernel launch");
}
template void Set<float>(int64_t, float, float*);
template void Set<double>(int64_t, double, double*);

}  // namespace crema::gpu
