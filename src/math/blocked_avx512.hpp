#pragma once
// What crema's AVX-512 kernels on oneDNN's 16-channel blocked layout (nChw16c) share
// (pointwise_depthwise.cpp, blocked_conv.cpp): the target attribute, crema's ReLU on 16 lanes,
// and the grouping of output channel blocks into register tiles. Internal to src/math.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#define CREMA_AVX512 __attribute__((target("avx512f")))

namespace crema::cpu {

// crema's ReLU (math/activation.hpp: max(v, 0) + slope * min(v, 0)) on 16 lanes, std::max and
// std::min as they compare: max(v, 0) = v < 0 ? 0 : v, min(v, 0) = 0 < v ? 0 : v (v for a NaN).
CREMA_AVX512 inline __m512 Relu16(__m512 v, __m512 slope) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 max = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero);
  const __m512 min = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zero, v, _CMP_LT_OQ), v, zero);
  return _mm512_add_ps(max, _mm512_mul_ps(slope, min));
}

// A register tile's accumulators, OB output blocks x P positions, y at the first output (output
// blocks ys floats apart, positions 16): set to the bias (or zero without one) where `first`,
// else loaded from y; stored to y, through the ReLU with `relu`'s slope where `last` and `relu`.
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void StartTile(__m512 (&acc)[OB][P], bool first,
                                                                  const float* bias, const float* y,
                                                                  size_t ys) {
  for (int o = 0; o < OB; ++o) {
    if (first) {
      const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias + o * 16) : _mm512_setzero_ps();
      for (int p = 0; p < P; ++p) acc[o][p] = b;
    } else {
      for (int p = 0; p < P; ++p) acc[o][p] = _mm512_loadu_ps(y + o * ys + p * 16);
    }
  }
}
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void StoreTile(const __m512 (&acc)[OB][P],
                                                                  bool last, const float* relu,
                                                                  float* y, size_t ys) {
  const bool relu_now = last && relu != nullptr;
  const __m512 slope = _mm512_set1_ps(relu_now ? *relu : 0.f);
  for (int o = 0; o < OB; ++o)
    for (int p = 0; p < P; ++p)
      _mm512_storeu_ps(y + o * ys + p * 16, relu_now ? Relu16(acc[o][p], slope) : acc[o][p]);
}

// acc += one input block's products, channel by channel in order: the inputs at x (P positions
// 16 floats apart, channel i at x[p * 16 + i]) times the weights at w (OB output blocks ws floats
// apart, channel i's 16 outputs at w + i * 16), as fused multiply-adds. (Unrolled by 8, not 16:
// the 3x3 kernel's tap of 16 steps overflowed the decoded-instruction cache, 146 GFLOP/s against
// 184.)
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void AddInputBlock(__m512 (&acc)[OB][P],
                                                                      const float* x,
                                                                      const float* w, size_t ws) {
#pragma GCC unroll 8
  for (int i = 0; i < 16; ++i) {
    __m512 wv[OB];
#pragma GCC unroll 4
    for (int o = 0; o < OB; ++o) wv[o] = _mm512_loadu_ps(w + o * ws + i * 16);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m512 b = _mm512_set1_ps(x[p * 16 + i]);
#pragma GCC unroll 4
      for (int o = 0; o < OB; ++o) acc[o][p] = _mm512_fmadd_ps(b, wv[o], acc[o][p]);
    }
  }
}

// f(std::integral_constant<int, P>()) for P = n, 1 to 7: the width of a row's last register tile
// as a template argument.
template <typename F>
CREMA_AVX512 __attribute__((always_inline)) inline void WithTileWidth(int n, F&& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 2:
      return f(std::integral_constant<int, 2>());
    case 3:
      return f(std::integral_constant<int, 3>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 5:
      return f(std::integral_constant<int, 5>());
    case 6:
      return f(std::integral_constant<int, 6>());
    case 7:
      return f(std::integral_constant<int, 7>());
  }
}

// The output blocks in groups for register tiles of 7 positions: three blocks (21
// accumulators) while `left` blocks remain, the last four as two and two.
inline int GroupBlocks(int left) { return left == 4 || left == 2 ? 2 : left >= 3 ? 3 : 1; }

}  // namespace crema::cpu
#endif  // __x86_64__
