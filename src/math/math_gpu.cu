#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "crema/blob.hpp"
#include "crema/error.hpp"
#include "math/channel_gpu.cuh"
#include "math/math_gpu.hpp"

namespace crema::gpu {
namespace {

cublasOperation_t Op(Trans t) { return t == Trans::kNo ? CUBLAS_OP_N : CUBLAS_OP_T; }

template <typename T>
__global__ void SetKernel(int64_t n, T value, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = value; }
}

// y[i] = f(a[i]) or f(a[i], b[i]); F is a device functor.
template <typename T, typename F>
__global__ void Unary(int64_t n, const T* a, T* y, F f) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = f(a[i]); }
}
template <typename T, typename F>
__global__ void Binary(int64_t n, const T* a, const T* b, T* y, F f) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = f(a[i], b[i]); }
}
template <typename T, typename F>
void LaunchUnary(int64_t n, const T* a, T* y, F f) {
  if (n == 0) return;
  Unary<<<Blocks(n), kThreads, 0, Stream()>>>(n, a, y, f);
  CheckLaunch("element-wise kernel");
}
template <typename T, typename F>
void LaunchBinary(int64_t n, const T* a, const T* b, T* y, F f) {
  if (n == 0) return;
  Binary<<<Blocks(n), kThreads, 0, Stream()>>>(n, a, b, y, f);
  CheckLaunch("element-wise kernel");
}

template <typename T>
__global__ void AxpbyKernel(int64_t n, T alpha, const T* x, T beta, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = alpha * x[i] + beta * y[i]; }
}

}  // namespace

void CheckLaunch(const char* what) { Check(cudaGetLastError(), what); }

void* DeviceScratch(Scratch kind, size_t bytes) {
  static std::mutex mutex;
  static auto* buffers = new std::map<std::pair<int, Scratch>, std::unique_ptr<Blob>>();
  if (bytes == 0) return nullptr;
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Blob>& blob = (*buffers)[{device, kind}];
  if (!blob) blob = std::make_unique<Blob>(DataType::kFloat64);
  const int64_t doubles = static_cast<int64_t>((bytes + 7) / 8);
  if (blob->count() < doubles) blob->Reshape(std::vector<int>{static_cast<int>(doubles)});
  return blob->mutable_gpu_data<double>();
}

// cuBLAS is column-major: a row-major C = A B is the column-major C^T = B^T A^T.
template <>
void Gemm<float>(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(Cublas().Sgemm(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b, ldb, a, lda,
                       &beta, c, n),
        "cublasSgemm");
}
template <>
void Gemm<double>(Trans trans_a, Trans trans_b, int m, int n, int k, double alpha, const double* a,
                  const double* b, double beta, double* c) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(Cublas().Dgemm(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b, ldb, a, lda,
                       &beta, c, n),
        "cublasDgemm");
}

template <>
void GemmStridedBatched<float>(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha,
                               const float* a, int64_t stride_a, const float* b, int64_t stride_b,
                               float beta, float* c, int64_t stride_c, int batch) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(Cublas().SgemmStridedBatched(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b,
                                     ldb, stride_b, a, lda, stride_a, &beta, c, n, stride_c, batch),
        "cublasSgemmStridedBatched");
}
template <>
void GemmStridedBatched<double>(Trans trans_a, Trans trans_b, int m, int n, int k, double alpha,
                                const double* a, int64_t stride_a, const double* b,
                                int64_t stride_b, double beta, double* c, int64_t stride_c,
                                int batch) {
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  Check(Cublas().DgemmStridedBatched(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b,
                                     ldb, stride_b, a, lda, stride_a, &beta, c, n, stride_c, batch),
        "cublasDgemmStridedBatched");
}

template <>
void Gemv<float>(Trans trans_a, int m, int n, float alpha, const float* a, const float* x,
                 float beta, float* y) {
  const cublasOperation_t op = trans_a == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  Check(Cublas().Sgemv(CublasHandle(), op, n, m, &alpha, a, n, x, 1, &beta, y, 1), "cublasSgemv");
}
template <>
void Gemv<double>(Trans trans_a, int m, int n, double alpha, const double* a, const double* x,
                  double beta, double* y) {
  const cublasOperation_t op = trans_a == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
  Check(Cublas().Dgemv(CublasHandle(), op, n, m, &alpha, a, n, x, 1, &beta, y, 1), "cublasDgemv");
}

template <>
void Axpy<float>(int64_t n, float alpha, const float* x, float* y) {
  Check(Cublas().Saxpy_64(CublasHandle(), n, &alpha, x, 1, y, 1), "cublasSaxpy");
}
template <>
void Axpy<double>(int64_t n, double alpha, const double* x, double* y) {
  Check(Cublas().Daxpy_64(CublasHandle(), n, &alpha, x, 1, y, 1), "cublasDaxpy");
}
template <>
void Scal<float>(int64_t n, float alpha, float* x) {
  Check(Cublas().Sscal_64(CublasHandle(), n, &alpha, x, 1), "cublasSscal");
}
template <>
void Scal<double>(int64_t n, double alpha, double* x) {
  Check(Cublas().Dscal_64(CublasHandle(), n, &alpha, x, 1), "cublasDscal");
}
template <>
float Dot<float>(int64_t n, const float* x, const float* y) {
  float result = 0;
  Check(Cublas().Sdot_64(CublasHandle(), n, x, 1, y, 1, &result), "cublasSdot");
  return result;
}
template <>
double Dot<double>(int64_t n, const double* x, const double* y) {
  double result = 0;
  Check(Cublas().Ddot_64(CublasHandle(), n, x, 1, y, 1, &result), "cublasDdot");
  return result;
}
template <>
float Asum<float>(int64_t n, const float* x) {
  float result = 0;
  Check(Cublas().Sasum_64(CublasHandle(), n, x, 1, &result), "cublasSasum");
  return result;
}
template <>
double Asum<double>(int64_t n, const double* x) {
  double result = 0;
  Check(Cublas().Dasum_64(CublasHandle(), n, x, 1, &result), "cublasDasum");
  return result;
}

template <typename T>
void Axpby(int64_t n, T alpha, const T* x, T beta, T* y) {
  if (n == 0) return;
  AxpbyKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, alpha, x, beta, y);
  CheckLaunch("Axpby kernel");
}
template <typename T>
void Scale(int64_t n, T alpha, const T* x, T* y) {
  LaunchUnary(n, x, y, [alpha] __device__(T v) { return alpha * v; });
}
template <typename T>
void Copy(int64_t n, const T* x, T* y) {
  if (n == 0 || x == y) return;
  Check(cudaMemcpyAsync(y, x, n * sizeof(T), cudaMemcpyDeviceToDevice, Stream()),
        "cudaMemcpyAsync (device to device)");
}
template <typename T>
void Set(int64_t n, T value, T* y) {
  if (n == 0) return;
  if (value == T(0)) {
    Check(cudaMemsetAsync(y, 0, n * sizeof(T), Stream()), "cudaMemsetAsync");
    return;
  }
  SetKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(n, value, y);
  CheckLaunch("Set kernel");
}
template <typename T>
void AddScalar(int64_t n, T alpha, T* y) {
  LaunchUnary(n, y, y, [alpha] __device__(T v) { return v + alpha; });
}
template <typename T>
void Add(int64_t n, const T* a, const T* b, T* y) {
  LaunchBinary(n, a, b, y, [] __device__(T u, T v) { return u + v; });
}
template <typename T>
void Sub(int64_t n, const T* a, const T* b, T* y) {
  LaunchBinary(n, a, b, y, [] __device__(T u, T v) { return u - v; });
}
template <typename T>
void Mul(int64_t n, const T* a, const T* b, T* y) {
  LaunchBinary(n, a, b, y, [] __device__(T u, T v) { return u * v; });
}
template <typename T>
void Div(int64_t n, const T* a, const T* b, T* y) {
  LaunchBinary(n, a, b, y, [] __device__(T u, T v) { return u / v; });
}
template <typename T>
void Sqr(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return v * v; });
}
template <typename T>
void Sqrt(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return sqrt(v); });
}
template <typename T>
void Exp(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return exp(v); });
}
template <typename T>
void Log(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return log(v); });
}
template <typename T>
void Abs(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return abs(v); });
}
template <typename T>
void Powx(int64_t n, const T* a, T b, T* y) {
  LaunchUnary(n, a, y, [b] __device__(T v) { return pow(v, b); });
}
template <typename T>
void Sign(int64_t n, const T* a, T* y) {
  LaunchUnary(n, a, y, [] __device__(T v) { return static_cast<T>((T(0) < v) - (v < T(0))); });
}

template <typename T>
void ReduceByAxis(int64_t outer, int64_t dim, int64_t inner, const T* a, const T* b,
                  bool accumulate, T* out) {
  ChannelSums<1>(
      "reduction", outer, dim, inner,
      [a, b] __device__(const ChannelElement& e, double* v) {
        // MulRn: never contracted with the sum into a fused multiply-add, so every kernel that
        // sums these terms (BatchNorm's fused ones too) gets the same bits.
        v[0] = b != nullptr ? MulRn(static_cast<double>(a[e.k]), static_cast<double>(b[e.k]))
                            : static_cast<double>(a[e.k]);
      },
      [accumulate, out] __device__(int64_t d, const double* sums) {
        out[d] = accumulate ? out[d] + static_cast<T>(sums[0]) : static_cast<T>(sums[0]);
      });
}
template <typename T>
void AddChannelBias(int64_t outer, int64_t channels, int64_t inner, const T* bias, bool relu,
                    T negative_slope, T* y) {
  if (bias == nullptr && !relu) return;
  ChannelMap("bias", outer, channels, inner, [=] __device__(int64_t k, int64_t c) {
    T v = y[k];
    if (bias != nullptr) v += bias[c];
    if (relu) v = ReLUForwardValue(v, negative_slope);
    y[k] = v;
  });
}
template <typename T>
void ReLUInPlace(int64_t n, T negative_slope, T* y) {
  LaunchUnary(n, y, y,
              [negative_slope] __device__(T v) { return ReLUForwardValue(v, negative_slope); });
}
template void ReLUInPlace<float>(int64_t, float, float*);
template void ReLUInPlace<double>(int64_t, double, double*);

namespace {
template <typename T>
__global__ void AddDotKernel(int64_t n, const T* x, const T* y, double* out) {
  T sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += x[k] * y[k];
  *out += sum;
}
}  // namespace

template <typename T>
void AddDot(int64_t n, const T* x, const T* y, double* out) {
  AddDotKernel<T><<<1, 1, 0, Stream()>>>(n, x, y, out);
  CheckLaunch("AddDot kernel");
}
template void AddDot<float>(int64_t, const float*, const float*, double*);
template void AddDot<double>(int64_t, const double*, const double*, double*);

template void AddChannelBias<float>(int64_t, int64_t, int64_t, const float*, bool, float, float*);
template void AddChannelBias<double>(int64_t, int64_t, int64_t, const double*, bool, double,
                                     double*);

template void ReduceByAxis<float>(int64_t, int64_t, int64_t, const float*, const float*, bool,
                                  float*);
template void ReduceByAxis<double>(int64_t, int64_t, int64_t, const double*, const double*, bool,
                                   double*);

#define CREMA_INSTANTIATE_GPU_MATH(T)                    \
  template void Axpby<T>(int64_t, T, const T*, T, T*);   \
  template void Scale<T>(int64_t, T, const T*, T*);      \
  template void Copy<T>(int64_t, const T*, T*);          \
  template void Set<T>(int64_t, T, T*);                  \
  template void AddScalar<T>(int64_t, T, T*);            \
  template void Add<T>(int64_t, const T*, const T*, T*); \
  template void Sub<T>(int64_t, const T*, const T*, T*); \
  template void Mul<T>(int64_t, const T*, const T*, T*); \
  template void Div<T>(int64_t, const T*, const T*, T*); \
  template void Sqr<T>(int64_t, const T*, T*);           \
  template void Sqrt<T>(int64_t, const T*, T*);          \
  template void Exp<T>(int64_t, const T*, T*);           \
  template void Log<T>(int64_t, const T*, T*);           \
  template void Abs<T>(int64_t, const T*, T*);           \
  template void Powx<T>(int64_t, const T*, T, T*);       \
  template void Sign<T>(int64_t, const T*, T*);
CREMA_INSTANTIATE_GPU_MATH(float)
CREMA_INSTANTIATE_GPU_MATH(double)

}  // namespace crema::gpu
