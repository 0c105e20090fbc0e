#include "math/math.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#include "math/dnnl_engine.hpp"

namespace crema::cpu {
namespace {

// BLAS lengths are int; longer vectors go through in pieces of at most this many elements.
constexpr int64_t kBlasChunk = INT_MAX;

CBLAS_TRANSPOSE ToCblas(Trans trans) { return trans == Trans::kNo ? CblasNoTrans : CblasTrans; }

template <typename F>
void ForEachChunk(int64_t n, F&& body) {
  for (int64_t offset = 0; offset < n; offset += kBlasChunk) {
    body(offset, static_cast<int>(std::min(kBlasChunk, n - offset)));
  }
}

// Overloads so the templates below pick the s/d routine by type.
inline void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                     const float* a, int lda, const float* b, int ldb, float beta, float* c,
                     int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
                     const double* a, int lda, const double* b, int ldb, double beta, double* c,
                     int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void BlasGemv(CBLAS_TRANSPOSE ta, int m, int n, float alpha, const float* a, const float* x,
                     float beta, float* y) {
  cblas_sgemv(CblasRowMajor, ta, m, n, alpha, a, n, x, 1, beta, y, 1);
}
inline void BlasGemv(CBLAS_TRANSPOSE ta, int m, int n, double alpha, const double* a,
                     const double* x, double beta, double* y) {
  cblas_dgemv(CblasRowMajor, ta, m, n, alpha, a, n, x, 1, beta, y, 1);
}
inline void BlasAxpy(int n, float alpha, const float* x, float* y) {
  cblas_saxpy(n, alpha, x, 1, y, 1);
}
inline void BlasAxpy(int n, double alpha, const double* x, double* y) {
  cblas_daxpy(n, alpha, x, 1, y, 1);
}
inline void BlasAxpby(int n, float alpha, const float* x, float beta, float* y) {
  cblas_saxpby(n, alpha, x, 1, beta, y, 1);
}
inline void BlasAxpby(int n, double alpha, const double* x, double beta, double* y) {
  cblas_daxpby(n, alpha, x, 1, beta, y, 1);
}
inline void BlasScal(int n, float alpha, float* x) { cblas_sscal(n, alpha, x, 1); }
inline void BlasScal(int n, double alpha, double* x) { cblas_dscal(n, alpha, x, 1); }
inline float BlasDot(int n, const float* x, int incx, const float* y, int incy) {
  return cblas_sdot(n, x, incx, y, incy);
}
inline double BlasDot(int n, const double* x, int incx, const double* y, int incy) {
  return cblas_ddot(n, x, incx, y, incy);
}
inline float BlasAsum(int n, const float* x) { return cblas_sasum(n, x, 1); }
inline double BlasAsum(int n, const double* x) { return cblas_dasum(n, x, 1); }

// Deterministic mode (solver `deterministic`): BLAS splits a product among its threads by their
// number, and its kernels round the edge tiles of a split differently, so the bits of C depend
// on the thread count. Instead C is cut into fixed column blocks, one single-threaded BLAS call
// each (OpenBLAS runs on one thread inside an active OpenMP region; the region is entered even
// for one block for that reason): the blocks depend on the shape only.
constexpr int kDeterministicBlock = 256;

// Outside deterministic mode float products go to oneDNN's sgemm where the build has it (faster
// on crema's small and skinny shapes: DnnlSgemm), else to BLAS.
inline bool FastGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                     const float* a, int lda, const float* b, int ldb, float beta, float* c,
                     int ldc) {
  return DnnlSgemm(ta != CblasNoTrans, tb != CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc);
}
inline bool FastGemm(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, double, const double*, int,
                     const double*, int, double, double*, int) {
  return false;
}

template <typename T>
void BlasGemmIn(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, T alpha, const T* a,
                int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  if (!gpu::Deterministic()) {
    if (!FastGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
      BlasGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int blocks = (n + kDeterministicBlock - 1) / kDeterministicBlock;
#pragma omp parallel for
  for (int j = 0; j < blocks; ++j) {
    const int j0 = j * kDeterministicBlock;
    const T* b_block = tb == CblasNoTrans ? b + j0 : b + static_cast<int64_t>(j0) * ldb;
    BlasGemm(ta, tb, m, std::min(kDeterministicBlock, n - j0), k, alpha, a, lda, b_block, ldb, beta,
             c + j0, ldc);
  }
}

// y = op(A) x with row-major A (m x n): blocks of y, as BlasGemmIn.
template <typename T>
void BlasGemvIn(CBLAS_TRANSPOSE ta, int m, int n, T alpha, const T* a, const T* x, T beta, T* y) {
  if (!gpu::Deterministic()) {
    BlasGemv(ta, m, n, alpha, a, x, beta, y);
    return;
  }
  const int outputs = ta == CblasNoTrans ? m : n;
  const int blocks = (outputs + kDeterministicBlock - 1) / kDeterministicBlock;
#pragma omp parallel for
  for (int j = 0; j < blocks; ++j) {
    const int j0 = j * kDeterministicBlock, size = std::min(kDeterministicBlock, outputs - j0);
    // A block of rows of A (NoTrans) or of columns (Trans), as a GEMM with one column of x.
    if (ta == CblasNoTrans)
      BlasGemm(CblasNoTrans, CblasNoTrans, size, 1, n, alpha, a + static_cast<int64_t>(j0) * n, n,
               x, 1, beta, y + j0, 1);
    else
      BlasGemm(CblasTrans, CblasNoTrans, size, 1, m, alpha, a + j0, n, x, 1, beta, y + j0, 1);
  }
}

}  // namespace

template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, const T* b,
          T beta, T* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  BlasGemmIn(ToCblas(trans_a), ToCblas(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

template <typename T>
void GemmLd(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, int lda,
            const T* b, int ldb, T beta, T* c, int ldc) {
  BlasGemmIn(ToCblas(trans_a), ToCblas(trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void Gemv(Trans trans_a, int m, int n, T alpha, const T* a, const T* x, T beta, T* y) {
  BlasGemvIn(ToCblas(trans_a), m, n, alpha, a, x, beta, y);
}

template <typename T>
void Axpy(int64_t n, T alpha, const T* x, T* y) {
  ForEachChunk(n, [&](int64_t offset, int len) { BlasAxpy(len, alpha, x + offset, y + offset); });
}

template <typename T>
void Axpby(int64_t n, T alpha, const T* x, T beta, T* y) {
  ForEachChunk(
      n, [&](int64_t offset, int len) { BlasAxpby(len, alpha, x + offset, beta, y + offset); });
}

template <typename T>
void Scal(int64_t n, T alpha, T* x) {
  ForEachChunk(n, [&](int64_t offset, int len) { BlasScal(len, alpha, x + offset); });
}

template <typename T>
void Scale(int64_t n, T alpha, const T* x, T* y) {
  Copy(n, x, y);
  Scal(n, alpha, y);
}

template <typename T>
void Copy(int64_t n, const T* x, T* y) {
  if (x != y && n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(T));
}

template <typename T>
void Set(int64_t n, T value, T* y) {
  if (value == T(0)) {
    if (n > 0) std::memset(y, 0, static_cast<size_t>(n) * sizeof(T));
    return;
  }
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

template <typename T>
void AddScalar(int64_t n, T alpha, T* y) {
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] += alpha;
}

// Deterministic mode (solver `deterministic`): a multithreaded BLAS splits long reductions
// among its threads, so the rounding depends on their number; summing in one fixed order does
// not.
template <typename T>
T Dot(int64_t n, const T* x, const T* y) {
  if (gpu::Deterministic()) {
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
    return sum;
  }
  T sum = 0;
  ForEachChunk(n,
               [&](int64_t offset, int len) { sum += BlasDot(len, x + offset, 1, y + offset, 1); });
  return sum;
}

template <typename T>
T StridedDot(int n, const T* x, int incx, const T* y, int incy) {
  return BlasDot(n, x, incx, y, incy);
}

template <typename T>
T Asum(int64_t n, const T* x) {
  if (gpu::Deterministic()) {
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::fabs(x[i]);
    return sum;
  }
  T sum = 0;
  ForEachChunk(n, [&](int64_t offset, int len) { sum += BlasAsum(len, x + offset); });
  return sum;
}

namespace {

// y[i] = f(i). Each element is independent, so the thread count cannot change results.
template <typename T, typename F>
void ElementWise(int64_t n, T* y, F f) {
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = f(i);
}

}  // namespace

template <typename T>
void Add(int64_t n, const T* a, const T* b, T* y) {
  ElementWise(n, y, [=](int64_t i) { return a[i] + b[i]; });
}
template <typename T>
void Sub(int64_t n, const T* a, const T* b, T* y) {
  ElementWise(n, y, [=](int64_t i) { return a[i] - b[i]; });
}
template <typename T>
void Mul(int64_t n, const T* a, const T* b, T* y) {
  ElementWise(n, y, [=](int64_t i) { return a[i] * b[i]; });
}
template <typename T>
void Div(int64_t n, const T* a, const T* b, T* y) {
  ElementWise(n, y, [=](int64_t i) { return a[i] / b[i]; });
}
template <typename T>
void Sqr(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return a[i] * a[i]; });
}
template <typename T>
void Sqrt(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return std::sqrt(a[i]); });
}
template <typename T>
void Exp(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return std::exp(a[i]); });
}
template <typename T>
void Log(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return std::log(a[i]); });
}
template <typename T>
void Abs(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return std::abs(a[i]); });
}
template <typename T>
void Sign(int64_t n, const T* a, T* y) {
  ElementWise(n, y, [=](int64_t i) { return static_cast<T>((T(0) < a[i]) - (a[i] < T(0))); });
}

template <typename T>
void Powx(int64_t n, const T* a, T b, T* y) {
  ElementWise(n, y, [=](int64_t i) { return std::pow(a[i], b); });
}

#define CREMA_INSTANTIATE_MATH(T)                                                              \
  template void Gemm<T>(Trans, Trans, int, int, int, T, const T*, const T*, T, T*);            \
  template void GemmLd<T>(Trans, Trans, int, int, int, T, const T*, int, const T*, int, T, T*, \
                          int);                                                                \
  template void Gemv<T>(Trans, int, int, T, const T*, const T*, T, T*);                        \
  template void Axpy<T>(int64_t, T, const T*, T*);                                             \
  template void Axpby<T>(int64_t, T, const T*, T, T*);                                         \
  template void Scal<T>(int64_t, T, T*);                                                       \
  template void Scale<T>(int64_t, T, const T*, T*);                                            \
  template void Copy<T>(int64_t, const T*, T*);                                                \
  template void Set<T>(int64_t, T, T*);                                                        \
  template void AddScalar<T>(int64_t, T, T*);                                                  \
  template T Dot<T>(int64_t, const T*, const T*);                                              \
  template T StridedDot<T>(int, const T*, int, const T*, int);                                 \
  template T Asum<T>(int64_t, const T*);                                                       \
  template void Add<T>(int64_t, const T*, const T*, T*);                                       \
  template void Sub<T>(int64_t, const T*, const T*, T*);                                       \
  template void Mul<T>(int64_t, const T*, const T*, T*);                                       \
  template void Div<T>(int64_t, const T*, const T*, T*);                                       \
  template void Sqr<T>(int64_t, const T*, T*);                                                 \
  template void Sqrt<T>(int64_t, const T*, T*);                                                \
  template void Exp<T>(int64_t, const T*, T*);                                                 \
  template void Log<T>(int64_t, const T*, T*);                                                 \
  template void Abs<T>(int64_t, const T*, T*);                                                 \
  template void Powx<T>(int64_t, const T*, T, T*);                                             \
  template void Sign<T>(int64_t, const T*, T*);

CREMA_INSTANTIATE_MATH(float)
CREMA_INSTANTIATE_MATH(double)
#undef CREMA_INSTANTIATE_MATH

}  // namespace crema::cpu
