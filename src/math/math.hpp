#pragma once
// CPU math: the only place that calls BLAS. Templates instantiated for float and double.
// Sizes are int64_t; BLAS calls take int (checked).
#include <cstdint>

namespace crema::cpu {

enum class Trans { kNo, kYes };

// C = alpha * op(A) * op(B) + beta * C; A is M x K, B is K x N, C is M x N, all row-major.
template <typename T>
void Gemm(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, const T* b,
          T beta, T* c);
// Gemm with explicit leading dimensions (row strides), for sub-matrices of larger buffers.
template <typename T>
void GemmLd(Trans trans_a, Trans trans_b, int m, int n, int k, T alpha, const T* a, int lda,
            const T* b, int ldb, T beta, T* c, int ldc);
// y = alpha * op(A) * x + beta * y; A is M x N row-major.
template <typename T>
void Gemv(Trans trans_a, int m, int n, T alpha, const T* a, const T* x, T beta, T* y);

template <typename T>
void Axpy(int64_t n, T alpha, const T* x, T* y);  // y += a x
template <typename T>
void Axpby(int64_t n, T alpha, const T* x, T beta, T* y);  // y = a x + b y
template <typename T>
void Scal(int64_t n, T alpha, T* x);  // x *= a
template <typename T>
void Scale(int64_t n, T alpha, const T* x, T* y);  // y = a x
template <typename T>
void Copy(int64_t n, const T* x, T* y);
template <typename T>
void Set(int64_t n, T value, T* y);
template <typename T>
void AddScalar(int64_t n, T alpha, T* y);  // y += a
template <typename T>
T Dot(int64_t n, const T* x, const T* y);
template <typename T>
T StridedDot(int n, const T* x, int incx, const T* y, int incy);
template <typename T>
T Asum(int64_t n, const T* x);
template <typename T>
void Add(int64_t n, const T* a, const T* b, T* y);  // element-wise
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

}  // namespace crema::cpu
