#include "core/blob_gpu.hpp"
#include "core/cuda_context.hpp"

namespace crema::gpu {
namespace {

constexpr int kBlock = 256;
constexpr int kMaxBlocks = 1024;

int GridFor(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<int>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}

template <typename T>
__global__ void UpdateKernel(int64_t n, const T* diff, T* data) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{kBlock} * gridDim.x)
    data[i] -= diff[i];
}

template <typename T>
__global__ void ScaleKernel(int64_t n, T factor, T* x) {
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{kBlock} * gridDim.x)
    x[i] *= factor;
}

// One partial sum per block; kSquare picks x^2 over |x|.
template <typename T, bool kSquare>
__global__ void ReduceKernel(int64_t n, const T* x, double* partial) {
  __shared__ double cache[kBlock];
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x; i < n;
       i += int64_t{kBlock} * gridDim.x) {
    const double v = static_cast<double>(x[i]);
    s += kSquare ? v * v : fabs(v);
  }
  cache[threadIdx.x] = s;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) cache[threadIdx.x] += cache[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = cache[0];
}

template <typename T, bool kSquare>
double Reduce(int64_t n, const T* x) {
  if (n == 0) return 0;
  const int blocks = GridFor(n);
  cudaStream_t stream = Stream();
  double* partial = nullptr;
  Check(cudaMallocAsync(&partial, blocks * sizeof(double), stream), "cudaMallocAsync");
  ReduceKernel<T, kSquare><<<blocks, kBlock, 0, stream>>>(n, x, partial);
  Check(cudaGetLastError(), "reduction kernel");
  double host[kMaxBlocks];
  Check(cudaMemcpyAsync(host, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync (device to host)");
  Check(cudaFreeAsync(partial, stream), "cudaFreeAsync");
  Synchronize();
  double s = 0;
  for (int i = 0; i < blocks; ++i) s += host[i];
  return s;
}

}  // namespace

template <typename T>
void BlobUpdate(int64_t n, const T* diff, T* data) {
  if (n == 0) return;
  UpdateKernel<<<GridFor(n), kBlock, 0, Stream()>>>(n, diff, data);
  Check(cudaGetLastError(), "update kernel");
}
template <typename T>
void BlobScale(int64_t n, double factor, T* x) {
  if (n == 0) return;
  ScaleKernel<<<GridFor(n), kBlock, 0, Stream()>>>(n, static_cast<T>(factor), x);
  Check(cudaGetLastError(), "scale kernel");
}
template <typename T>
double BlobAsum(int64_t n, const T* x) {
  return Reduce<T, false>(n, x);
}
template <typename T>
double BlobSumsq(int64_t n, const T* x) {
  return Reduce<T, true>(n, x);
}

template void BlobUpdate<float>(int64_t, const float*, float*);
template void BlobUpdate<double>(int64_t, const double*, double*);
template void BlobScale<float>(int64_t, double, float*);
template void BlobScale<double>(int64_t, double, double*);
template double BlobAsum<float>(int64_t, const float*);
template double BlobAsum<double>(int64_t, const double*);
template double BlobSumsq<float>(int64_t, const float*);
template double BlobSumsq<double>(int64_t, const double*);

}  // namespace crema::gpu
