#pragma once
// Per-channel loops over a (num, channels, spatial) blob for the normalisation layers (BatchNorm,
// Scale), spread over OpenMP threads so that results do not depend on the thread count: each
// channel's sum is computed by one thread in an order fixed by the shape, and each element is
// written by one thread.
#include <cstdint>

#include "math/cpu_isa.hpp"

namespace crema::cpu {

// Below this many elements a loop runs on one thread.
constexpr int64_t kChannelLoopParallelWork = 65536;

// sums[c] = the sum, in Acc, of term(c, k) over the elements k of channel c: eight partial
// sums, of the positions i with i % 8 = 0, 1, ..., 7 of every image (each in the order n, i),
// added at the end as ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). The partial sums are
// independent chains, which the CPU overlaps and vectorises (compiled for its widest vectors,
// math/cpu_isa.hpp), instead of each add waiting for the one before; the order is fixed by the
// shape alone.
template <typename Acc, typename Term>
void ChannelSums(int64_t num, int64_t channels, int64_t spatial, const Term& term, Acc* sums) {
  constexpr int64_t kPartials = 8;
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c = 0; c < channels; ++c) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      Acc part[kPartials] = {};
      for (int64_t n = 0; n < num; ++n) {
        const int64_t base = (n * channels + c) * spatial;
        int64_t i = 0;
        for (; i + kPartials <= spatial; i += kPartials)
          for (int64_t k = 0; k < kPartials; ++k) part[k] += term(c, base + i + k);
        for (; i < spatial; ++i) part[i % kPartials] += term(c, base + i);
      }
      sums[c] =
          ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    });
  }
}

// Two sums in Acc per channel in one pass over the blob, each taken exactly as ChannelSums<Acc>
// takes its term alone. term(c, k, s) sets s[0] (summed into sums0) and s[1] (into sums1).
// (The loops of these sums are written out in each: with them in one shared function that calls
// back, GCC left this one's partial sums half scalar, and BatchNorm's statistics pass took 4x.)
template <typename Acc, typename Term>
void ChannelSumPairs(int64_t num, int64_t channels, int64_t spatial, const Term& term, Acc* sums0,
                     Acc* sums1) {
  constexpr int64_t kPartials = 8;
  const auto combine = [](const Acc* p) {
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  };
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c = 0; c < channels; ++c) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      Acc p0[kPartials] = {}, p1[kPartials] = {};
      const auto add = [&](int64_t slot, int64_t k) CREMA_ISA_INLINE {
        Acc s[2];
        term(c, k, s);
        p0[slot] += s[0];
        p1[slot] += s[1];
      };
      for (int64_t n = 0; n < num; ++n) {
        const int64_t base = (n * channels + c) * spatial;
        int64_t i = 0;
        for (; i + kPartials <= spatial; i += kPartials)
          for (int64_t k = 0; k < kPartials; ++k) add(k, base + i + k);
        for (; i < spatial; ++i) add(i % kPartials, base + i);
      }
      sums0[c] = combine(p0);
      sums1[c] = combine(p1);
    });
  }
}

// Two sums in A and two in B per channel in one pass over the blob, each taken exactly as
// ChannelSums<A> or ChannelSums<B> takes its term alone (the same eight partials, order and final
// additions): a pass that fuses layers keeps the bits of the layers run one by one.
// term(c, k, a, b) sets a[0], a[1] (summed in A) and b[0], b[1] (summed in B) for element k.
template <typename A, typename B, typename Term>
void ChannelSumsTwoByTwo(int64_t num, int64_t channels, int64_t spatial, const Term& term, A* a0,
                         A* a1, B* b0, B* b1) {
  constexpr int64_t kPartials = 8;
  const auto combine = [](const auto* p) {
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  };
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t c = 0; c < channels; ++c) {
    RunForCpuIsa([&]() CREMA_ISA_INLINE {
      A pa0[kPartials] = {}, pa1[kPartials] = {};
      B pb0[kPartials] = {}, pb1[kPartials] = {};
      const auto add = [&](int64_t slot, int64_t k) CREMA_ISA_INLINE {
        A a[2];
        B b[2];
        term(c, k, a, b);
        pa0[slot] += a[0];
        pa1[slot] += a[1];
        pb0[slot] += b[0];
        pb1[slot] += b[1];
      };
      for (int64_t n = 0; n < num; ++n) {
        const int64_t base = (n * channels + c) * spatial;
        int64_t i = 0;
        for (; i + kPartials <= spatial; i += kPartials)
          for (int64_t k = 0; k < kPartials; ++k) add(k, base + i + k);
        for (; i < spatial; ++i) add(i % kPartials, base + i);
      }
      a0[c] = combine(pa0);
      a1[c] = combine(pa1);
      b0[c] = combine(pb0);
      b1[c] = combine(pb1);
    });
  }
}

// f(c, offset) for every (image, channel) plane, offset = its first element; planes are spread
// over threads.
template <typename F>
void ForEachChannelPlane(int64_t num, int64_t channels, int64_t spatial, const F& f) {
  const int64_t planes = num * channels;
#pragma omp parallel for if (planes * spatial > kChannelLoopParallelWork)
  for (int64_t p = 0; p < planes; ++p) f(p % channels, p * spatial);
}

}  // namespace crema::cpu
