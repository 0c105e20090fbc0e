#pragma once
// Helpers compiled for both the host and the device (nvcc), so a layer's CPU loop and its CUDA
// kernel can share per-element code.
#include <climits>

#ifdef __CUDACC__
#define CREMA_HOST_DEVICE __host__ __device__
#else
#define CREMA_HOST_DEVICE
#endif

namespace crema {

// The class index a label value stands for: the value truncated towards zero, as Caffe's
// static_cast<int>. A value with no int (NaN, infinite, beyond the int range) gives INT_MIN, which
// every layer rejects as out of range (and which no ignore_label can match in practice), on the
// CPU and the GPU alike (a plain cast is undefined there and gives 0 on the GPU).
template <typename T>
CREMA_HOST_DEVICE inline int LabelIndex(T value) {
  return value > static_cast<T>(INT_MIN) - 1 && value < static_cast<T>(INT_MAX) + 1
             ? static_cast<int>(value)
             : INT_MIN;
}

}  // namespace crema
