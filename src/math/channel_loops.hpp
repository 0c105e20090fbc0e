#pragma once
// Per-channel loops over a (num, channels, spatial) blob for the normalisation layers (BatchNorm,
// Scale), spread over OpenMP threads so that results do not depend on the thread count: each
// channel's sum is computed by one thread in an order fixed by the shape, and each element is
// written by one thread.
#include <cstdint>
#include <type_traits>

#include "crema/error.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {

// Below this many elements a loop runs on one thread.
constexpr int64_t kChannelLoopParallelWork = 65536;

// The layout of the blob the loops below walk: B = 1, plain (num, channels, spatial); B > 1,
// channel-blocked (oneDNN's nChw16c / nChw8c: num, channels / B, spatial, B), the channels a
// multiple of B. Element (n, c, i) is at (n * channels + c - c % B) * spatial + i * B + c % B.
template <int B>
using Block = std::integral_constant<int, B>;

// f(Block<B>{}) for a blob channel-blocked by `block` (0: plain, f(Block<1>{})).
template <typename F>
void WithChannelBlock(int block, const F& f) {
  switch (block) {
    case 0:
      return f(Block<1>{});
    case 8:
      return f(Block<8>{});
    case 16:
      return f(Block<16>{});
    default:
      CREMA_ASSERT(false, "channel block ", block);
  }
}

// Where channel c of the first image starts (its element i = 0).
template <int B>
int64_t ChannelStart(int64_t c, int64_t spatial, Block<B> = {}) {
  return (c - c % B) * spatial + c % B;
}

// The final additions of a channel's eight partial sums, p[k * B + j] for channel j of a block.
template <int B, typename Acc>
Acc CombinePartials(const Acc* p, int j) {
  return ((p[j] + p[B + j]) + (p[2 * B + j] + p[3 * B + j])) +
         ((p[4 * B + j] + p[5 * B + j]) + (p[6 * B + j] + p[7 * B + j]));
}

// The partial sums' walk over one image's block of B channels (plain: one channel) of `spatial`
// positions from element `base`: add(p, c, k) adds element k of channel c into partial p =
// (i % 8) * B + (c - c0) (position i). For B = 1 the positions run in one loop: GCC vectorises
// the eight partials of a channel in that form, and not with a loop over one channel inside it
// (1.8x slower statistics pass).
template <int B, typename Add>
CREMA_ISA_INLINE inline void WalkPartials(int64_t c0, int64_t base, int64_t spatial,
                                          const Add& add) {
  constexpr int64_t kPartials = 8;
  int64_t i = 0;
  for (; i + kPartials <= spatial; i += kPartials) {
    if constexpr (B == 1) {
      for (int64_t k = 0; k < kPartials; ++k) add(k, c0, base + i + k);
    } else {
      for (int64_t k = 0; k < kPartials; ++k)
        for (int j = 0; j < B; ++j) add(k * B + j, c0 + j, base + (i + k) * B + j);
    }
  }
  for (; i < spatial; ++i)
    for (int j = 0; j < B; ++j) add(i % kPartials * B + j, c0 + j, base + i * B + j);
}

// sums[c] = the sum, in Acc, of term(c, k) over the elements k of channel c: eight partial
// sums, of the positions i with i % 8 = 0, 1, ..., 7 of every image (each in the order n, i),
// added at the end as ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). The partial sums are
// independent chains, which the CPU overlaps and vectorises (compiled for its widest vectors,
// math/cpu_isa.hpp), instead of each add waiting for the one before; the order is fixed by the
// shape alone, and is the same in either layout (Block<B>: blocked, the B channels of a block
// are summed side by side, each in that order, so both layouts give the same bits).
template <typename Acc, typename Term, int B = 1>
void ChannelSums(int64_t num, int64_t channels, int64_t spatial, const Term& term, Acc* sums,
                 Block<B> = {}) {
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c0 = 0; c0 < channels; c0 += B) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      Acc part[8 * B] = {};
      for (int64_t n = 0; n < num; ++n)
        WalkPartials<B>(c0, (n * channels + c0) * spatial, spatial,
                        [&](int64_t p, int64_t c, int64_t k)
                            CREMA_ISA_INLINE { part[p] += term(c, k); });
      for (int j = 0; j < B; ++j) sums[c0 + j] = CombinePartials<B>(part, j);
    });
  }
}

// Two sums in Acc per channel in one pass over the blob, each taken exactly as ChannelSums<Acc>
// takes its term alone. term(c, k, s) sets s[0] (summed into sums0) and s[1] (into sums1).
template <typename Acc, typename Term, int B = 1>
void ChannelSumPairs(int64_t num, int64_t channels, int64_t spatial, const Term& term, Acc* sums0,
                     Acc* sums1, Block<B> = {}) {
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c0 = 0; c0 < channels; c0 += B) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      Acc p0[8 * B] = {}, p1[8 * B] = {};
      for (int64_t n = 0; n < num; ++n)
        WalkPartials<B>(c0, (n * channels + c0) * spatial, spatial,
                        [&](int64_t p, int64_t c, int64_t k) CREMA_ISA_INLINE {
                          Acc s[2];
                          term(c, k, s);
                          p0[p] += s[0];
                          p1[p] += s[1];
                        });
      for (int j = 0; j < B; ++j) {
        sums0[c0 + j] = CombinePartials<B>(p0, j);
        sums1[c0 + j] = CombinePartials<B>(p1, j);
      }
    });
  }
}

// Two sums in A and two in B per channel in one pass over the blob, each taken exactly as
// ChannelSums<A> or ChannelSums<B> takes its term alone (the same eight partials, order and final
// additions): a pass that fuses layers keeps the bits of the layers run one by one.
// term(c, k, a, b) sets a[0], a[1] (summed in A) and b[0], b[1] (summed in B) for element k.
template <typename A, typename B, typename Term, int Blk = 1>
void ChannelSumsTwoByTwo(int64_t num, int64_t channels, int64_t spatial, const Term& term, A* a0,
                         A* a1, B* b0, B* b1, Block<Blk> = {}) {
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c0 = 0; c0 < channels; c0 += Blk) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      A pa0[8 * Blk] = {}, pa1[8 * Blk] = {};
      B pb0[8 * Blk] = {}, pb1[8 * Blk] = {};
      for (int64_t n = 0; n < num; ++n)
        WalkPartials<Blk>(c0, (n * channels + c0) * spatial, spatial,
                          [&](int64_t p, int64_t c, int64_t k) CREMA_ISA_INLINE {
                            A a[2];
                            B b[2];
                            term(c, k, a, b);
                            pa0[p] += a[0];
                            pa1[p] += a[1];
                            pb0[p] += b[0];
                            pb1[p] += b[1];
                          });
      for (int j = 0; j < Blk; ++j) {
        a0[c0 + j] = CombinePartials<Blk>(pa0, j);
        a1[c0 + j] = CombinePartials<Blk>(pa1, j);
        b0[c0 + j] = CombinePartials<Blk>(pb0, j);
        b1[c0 + j] = CombinePartials<Blk>(pb1, j);
      }
    });
  }
}

// f(c0, offset) for every image's block of B channels c0 .. c0 + B - 1 (plain: every (image,
// channel) plane), offset = its first element; its spatial * B elements follow, channel c0 + j of
// position i at offset + i * B + j. Spread over threads.
template <typename F, int B = 1>
void ForEachChannelPlane(int64_t num, int64_t channels, int64_t spatial, const F& f,
                         Block<B> = {}) {
  const int64_t blocks = channels / B;
  const int64_t planes = num * blocks;
#pragma omp parallel for if (planes * spatial * B > kChannelLoopParallelWork)
  for (int64_t p = 0; p < planes; ++p) f(p % blocks * B, p * spatial * B);
}

}  // namespace crema::cpu
