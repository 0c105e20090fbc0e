#pragma once
// Element-type conversion between float32 and the half types of mixed precision (float16,
// bfloat16), on the CPU and the GPU: rounding to nearest, ties to even; overflow gives infinity
// (float16), NaN stays NaN. Same-type "conversion" copies.
#include <cstdint>

#include "crema/blob.hpp"

namespace crema::cpu {
void Convert(int64_t n, DataType from, const void* x, DataType to, void* y);
}  // namespace crema::cpu

#ifdef CREMA_WITH_CUDA
namespace crema::gpu {
// On the current stream.
void Convert(int64_t n, DataType from, const void* x, DataType to, void* y);
}  // namespace crema::gpu
#endif
