#include "math/convert.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstring>

#include "core/half.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {
namespace {

bool IsSupported(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat16 || type == DataType::kBFloat16;
}

#if defined(__x86_64__)
// F16C converts eight values per instruction, with the rounding FloatToHalf spells out.
__attribute__((target("avx,f16c"))) void FloatToHalfF16c(int64_t n, const float* x, uint16_t* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = FloatToHalf(x[i]);
}
__attribute__((target("avx,f16c"))) void HalfToFloatF16c(int64_t n, const uint16_t* x, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = HalfToFloat(x[i]);
}
#endif

void ToFloat(int64_t n, DataType from, const void* x, float* y) {
  if (from == DataType::kFloat32) {
    std::memcpy(y, x, static_cast<size_t>(n) * 4);
    return;
  }
  const auto* h = static_cast<const uint16_t*>(x);
  if (from == DataType::kBFloat16) {
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) y[i] = BFloat16ToFloat(h[i]);
    return;
  }
#if defined(__x86_64__)
  if (CpuHasF16c()) return HalfToFloatF16c(n, h, y);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = HalfToFloat(h[i]);
}

void FromFloat(int64_t n, const float* x, DataType to, void* y) {
  if (to == DataType::kFloat32) {
    std::memcpy(y, x, static_cast<size_t>(n) * 4);
    return;
  }
  auto* h = static_cast<uint16_t*>(y);
  if (to == DataType::kBFloat16) {
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) h[i] = FloatToBFloat16(x[i]);
    return;
  }
#if defined(__x86_64__)
  if (CpuHasF16c()) return FloatToHalfF16c(n, x, h);
#endif
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToHalf(x[i]);
}

}  // namespace

void Convert(int64_t n, DataType from, const void* x, DataType to, void* y) {
  CREMA_ASSERT(IsSupported(from) && IsSupported(to), DataTypeName(from), " -> ", DataTypeName(to));
  if (n <= 0) return;
  if (from == to) {
    std::memmove(y, x, static_cast<size_t>(n) * SizeOf(from));
  } else if (from == DataType::kFloat32) {
    FromFloat(n, static_cast<const float*>(x), to, y);
  } else if (to == DataType::kFloat32) {
    ToFloat(n, from, x, static_cast<float*>(y));
  } else {
    // float16 <-> bfloat16 through float32, a block at a time.
    constexpr int64_t kBlock = 4096;
    float buffer[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = n - i < kBlock ? n - i : kBlock;
      ToFloat(m, from, static_cast<const uint16_t*>(x) + i, buffer);
      FromFloat(m, buffer, to, static_cast<uint16_t*>(y) + i);
    }
  }
}

}  // namespace crema::cpu
