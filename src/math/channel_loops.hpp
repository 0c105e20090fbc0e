#pragma once
// Per-channel loops over a (num, channels, spatial) blob for the normalisation layers (BatchNorm,
// Scale), spread over OpenMP threads so that results do not depend on the thread count: each
// channel's sum is one serial chain in the order image, position (the order of a plain nested
// loop), and each element is written by one thread.
#include <cstdint>

namespace crema::cpu {

// Below this many elements a loop runs on one thread.
constexpr int64_t kChannelLoopParallelWork = 65536;

// sums[c] = the sum, in Acc, of term(c, k) over the elements k of channel c, added in the order
// n, i from Acc(0). Channels go four at a time, so that their chains overlap in the pipeline
// instead of each add waiting for the one before.
template <typename Acc, typename Term>
void ChannelSums(int64_t num, int64_t channels, int64_t spatial, const Term& term, Acc* sums) {
  constexpr int kLanes = 4;
  const int64_t blocks = (channels + kLanes - 1) / kLanes;
#pragma omp parallel for if (num * channels * spatial > kChannelLoopParallelWork)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kLanes;
    if (channels - c0 < kLanes) {
      for (int64_t c = c0; c < channels; ++c) {
        Acc acc = 0;
        for (int64_t n = 0; n < num; ++n) {
          const int64_t base = (n * channels + c) * spatial;
          for (int64_t i = 0; i < spatial; ++i) acc += term(c, base + i);
        }
        sums[c] = acc;
      }
      continue;
    }
    Acc acc[kLanes] = {0, 0, 0, 0};
    for (int64_t n = 0; n < num; ++n) {
      const int64_t base = (n * channels + c0) * spatial;
      for (int64_t i = 0; i < spatial; ++i)
        for (int l = 0; l < kLanes; ++l) acc[l] += term(c0 + l, base + l * spatial + i);
    }
    for (int l = 0; l < kLanes; ++l) sums[c0 + l] = acc[l];
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
