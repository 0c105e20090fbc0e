#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "math/convert.hpp"
#include "math/math_gpu.hpp"

namespace crema::gpu {
namespace {

// The device type of each element type, and float32 to and from it with round to nearest even.
template <typename T>
__device__ float WidenToFloat(T v);
template <>
__device__ float WidenToFloat<float>(float v) {
  return v;
}
template <>
__device__ float WidenToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ float WidenToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ T NarrowFromFloat(float v);
template <>
__device__ float NarrowFromFloat<float>(float v) {
  return v;
}
template <>
__device__ __half NarrowFromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 NarrowFromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename From, typename To>
__global__ void ConvertKernel(int64_t n, const From* x, To* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = NarrowFromFloat<To>(WidenToFloat<From>(x[i])); }
}

template <typename From>
void ConvertFrom(int64_t n, const From* x, DataType to, void* y) {
  switch (to) {
    case DataType::kFloat32:
      ConvertKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, x, static_cast<float*>(y));
      break;
    case DataType::kFloat16:
      ConvertKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, x, static_cast<__half*>(y));
      break;
    case DataType::kBFloat16:
      ConvertKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, x, static_cast<__nv_bfloat16*>(y));
      break;
    default:
      CREMA_ASSERT(false, "conversion to ", DataTypeName(to));
  }
  CheckLaunch("element type conversion");
}

}  // namespace

void Convert(int64_t n, DataType from, const void* x, DataType to, void* y) {
  if (n <= 0) return;
  switch (from) {
    case DataType::kFloat32:
      return ConvertFrom(n, static_cast<const float*>(x), to, y);
    case DataType::kFloat16:
      return ConvertFrom(n, static_cast<const __half*>(x), to, y);
    case DataType::kBFloat16:
      return ConvertFrom(n, static_cast<const __nv_bfloat16*>(x), to, y);
    default:
      CREMA_ASSERT(false, "conversion from ", DataTypeName(from));
  }
}

}  // namespace crema::gpu
