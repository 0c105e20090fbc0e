#include "crema/blob.hpp"
#include "crema/error.hpp"
#include "math/math_gpu.hpp"
#include "math/strided_gpu.hpp"

namespace crema::gpu {
namespace {

static_assert(StridedMap::kMaxRank == Blob::kMaxAxes, "a map covers every blob rank");

__device__ int64_t MapIndex(const StridedMap& map, int64_t i) {
  int64_t mapped = map.base;
  for (int a = map.rank - 1; a >= 0; --a) {
    mapped += (i % map.shape[a]) * map.stride[a];
    i /= map.shape[a];
  }
  return mapped;
}

template <typename T>
__global__ void GatherKernel(int64_t n, StridedMap map, const T* src, T* dst) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { dst[i] = src[MapIndex(map, i)]; }
}

template <typename T>
__global__ void ScatterKernel(int64_t n, StridedMap map, const T* src, T* dst) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { dst[MapIndex(map, i)] = src[i]; }
}

}  // namespace

StridedMap MakeStridedMap(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride,
                          int64_t base) {
  CREMA_ASSERT(shape.size() == stride.size() && shape.size() <= StridedMap::kMaxRank,
               "strided map of ", shape.size(), " axes and ", stride.size(), " strides");
  StridedMap map;
  map.rank = static_cast<int>(shape.size());
  for (int a = 0; a < map.rank; ++a) {
    map.shape[a] = shape[a];
    map.stride[a] = stride[a];
  }
  map.base = base;
  return map;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int a = static_cast<int>(shape.size()) - 2; a >= 0; --a)
    strides[a] = strides[a + 1] * shape[a + 1];
  return strides;
}

template <typename T>
void GatherStrided(int64_t n, const StridedMap& map, const T* src, T* dst) {
  if (n == 0) return;
  GatherKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(n, map, src, dst);
  CheckLaunch("strided gather");
}

template <typename T>
void ScatterStrided(int64_t n, const StridedMap& map, const T* src, T* dst) {
  if (n == 0) return;
  ScatterKernel<T><<<Blocks(n), kThreads, 0, Stream()>>>(n, map, src, dst);
  CheckLaunch("strided scatter");
}

template void GatherStrided<float>(int64_t, const StridedMap&, const float*, float*);
template void GatherStrided<double>(int64_t, const StridedMap&, const double*, double*);
template void ScatterStrided<float>(int64_t, const StridedMap&, const float*, float*);
template void ScatterStrided<double>(int64_t, const StridedMap&, const double*, double*);

template <typename T>
void CopySlabs(int64_t rows, int64_t width, const T* src, int64_t src_stride, T* dst,
               int64_t dst_stride) {
  if (rows == 0 || width == 0) return;
  Check(cudaMemcpy2DAsync(dst, dst_stride * sizeof(T), src, src_stride * sizeof(T),
                          width * sizeof(T), rows, cudaMemcpyDeviceToDevice, Stream()),
        "cudaMemcpy2DAsync (device to device)");
}
template void CopySlabs<float>(int64_t, int64_t, const float*, int64_t, float*, int64_t);
template void CopySlabs<double>(int64_t, int64_t, const double*, int64_t, double*, int64_t);

}  // namespace crema::gpu
