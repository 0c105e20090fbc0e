#pragma once
// What crema's AVX-512 kernels on oneDNN's 16-channel blocked layout (nChw16c) share
// (pointwise_depthwise.cpp, blocked_conv.cpp): the target attribute, crema's ReLU on 16 lanes,
// the register tiles' start, products and store, the weights fetched ahead, the last tile's
// width as a template argument, the threads' shares and the grouping of output channel blocks.
// Internal to src/math.
#if defined(__x86_64__)
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#define CREMA_AVX512 __attribute__((target("avx512f")))

namespace crema::cpu {

// crema's ReLU (math/activation.hpp: max(v, 0) + slope * min(v, 0)) on 16 lanes, std::max and
// std::min as they compare: max(v, 0) = v < 0 ? 0 : v, min(v, 0) = 0 < v ? 0 : v (v for a NaN).
// vmaxps/vminps(a, b) are a > b ? a : b and a < b ? a : b, so with 0 first they are exactly
// those (a NaN or -0 passing through as v).
CREMA_AVX512 inline __m512 Relu16(__m512 v, __m512 slope) {
  const __m512 zero = _mm512_setzero_ps();
  return _mm512_add_ps(_mm512_max_ps(zero, v), _mm512_mul_ps(slope, _mm512_min_ps(zero, v)));
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
// apart, channel i's 16 outputs at w + i * 16), as fused multiply-adds. Four channels a loop
// iteration, written out (AddInputChannel: channel I): GCC left the 16 channels' loop rolled
// under `#pragma GCC unroll 8`, one channel an iteration, whose loop instructions took issue
// slots from the multiply-adds (with four: MobileNet v1 batch 1 passes 1.0-2.2% faster and
// ResNet-50's 0.8%, one thread, in one process; fully unrolled, the 3x3 kernel overflowed the
// decoded-instruction cache, 146 GFLOP/s against 184).
template <int OB, int P, int I>
CREMA_AVX512 __attribute__((always_inline)) inline void AddInputChannel(__m512 (&acc)[OB][P],
                                                                        const float* x,
                                                                        const float* w, size_t ws) {
  __m512 wv[OB];
#pragma GCC unroll 4
  for (int o = 0; o < OB; ++o) wv[o] = _mm512_loadu_ps(w + o * ws + I * 16);
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
    const __m512 b = _mm512_set1_ps(x[p * 16 + I]);
#pragma GCC unroll 4
    for (int o = 0; o < OB; ++o) acc[o][p] = _mm512_fmadd_ps(b, wv[o], acc[o][p]);
  }
}
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void AddInputBlock(__m512 (&acc)[OB][P],
                                                                      const float* x,
                                                                      const float* w, size_t ws) {
  for (int i = 0; i < 16; i += 4) {
    AddInputChannel<OB, P, 0>(acc, x + i, w + i * 16, ws);
    AddInputChannel<OB, P, 1>(acc, x + i, w + i * 16, ws);
    AddInputChannel<OB, P, 2>(acc, x + i, w + i * 16, ws);
    AddInputChannel<OB, P, 3>(acc, x + i, w + i * 16, ws);
  }
}

// Weights a register tile fetches into L2 while it computes (the next input blocks' weights: at
// batch 1 they come from memory, and the hardware's prefetcher follows each output block's
// weights only within a 4 KB page): cache lines [first, first + count) of each of OB output
// blocks' weights, ws floats apart from `at`; none without `at`.
struct Ahead {
  const float* at = nullptr;
  int first = 0, count = 0;
  // Issues those of the first part / parts of the fetches not issued yet (*done of them are).
  template <int OB>
  CREMA_AVX512 __attribute__((always_inline)) inline void Fetch(int part, int parts, size_t ws,
                                                                int* done) const {
    if (at == nullptr) return;
    for (const int until = OB * count * part / parts; *done < until; ++*done)
      _mm_prefetch(reinterpret_cast<const char*>(at + *done % OB * ws + (first + *done / OB) * 16),
                   _MM_HINT_T1);
  }
};

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

// Inside an OpenMP parallel region, the calling thread's equal share [begin, end) of `total`
// units of work (thread t of T: total * t / T to total * (t + 1) / T), and its number.
struct ThreadShare {
  explicit ThreadShare(int64_t total) {
#ifdef _OPENMP
    const int threads = omp_get_num_threads();
    thread = omp_get_thread_num();
#else
    const int threads = 1;
#endif
    begin = total * thread / threads;
    end = total * (thread + 1) / threads;
  }
  int thread = 0;
  int64_t begin = 0, end = 0;
};

// Of `count` parts of `size` units each, the first of which starts at unit `base`, the first
// part that starts at or after unit `at` (count where none does): a thread's share of a group's
// rows or tiles, where threads take equal shares of a pass's units.
inline int PartsFrom(int64_t at, int64_t base, int size, int count) {
  return at <= base ? 0 : static_cast<int>(std::min<int64_t>((at - base + size - 1) / size, count));
}

// The output blocks in groups for register tiles of 7 positions: three blocks (21
// accumulators) while `left` blocks remain, the last four as two and two.
inline int GroupBlocks(int left) { return left == 4 || left == 2 ? 2 : left >= 3 ? 3 : 1; }

}  // namespace crema::cpu
#endif  // __x86_64__
