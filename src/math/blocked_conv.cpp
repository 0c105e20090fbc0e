#include "math/blocked_conv.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "crema/error.hpp"
#include "math/blocked_avx512.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {
namespace {

constexpr int kBlock = 16;     // channels per block (one zmm register)
constexpr int kPositions = 7;  // positions of a row per register tile
constexpr int kTaps = 9;

#if defined(__x86_64__)
// OB output blocks x P positions of a row, one input block added: x at the padded input's
// position (row, column) of the tile's first output in that block (rows xrow floats apart), w at
// the first output block's weights for the input block (output blocks ws floats apart), y at the
// first output (output blocks ys apart). Starts from the bias (first) or from y, then stores,
// through the ReLU when `last`. Spreads the prefetches of `ahead` over its taps.
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void Tile(const float* x, size_t xrow,
                                                             const float* w, size_t ws,
                                                             const float* bias, float* y, size_t ys,
                                                             bool first, bool last,
                                                             const float* relu, Ahead ahead) {
  __m512 acc[OB][P];
  StartTile(acc, first, bias, y, ys);
  int fetched = 0;
  for (int kh = 0; kh < 3; ++kh)
    for (int kw = 0; kw < 3; ++kw) {
      ahead.Fetch<OB>(kh * 3 + kw + 1, kTaps, ws, &fetched);
      AddInputBlock(acc, x + kh * xrow + kw * kBlock, w + (kh * 3 + kw) * kBlock * kBlock, ws);
    }
  StoreTile(acc, last, relu, y, ys);
}

// Output rows [r0, r1) of one image for OB output blocks: xp at the image's padded input, w at
// the group's weights, bias at its first block's (or null), y at its first output block. Input
// block by input block (its weights in L1), every row, a tile at a time; meanwhile the next input
// block's weights are fetched (the group's next, or the next group's first where `more`): at
// batch 1 the weights come from memory (ResNet-50's 7 x 7 ones are 9.4 MB a layer), and the
// hardware's prefetcher, which follows each block's weights only within a 4 KB page, left the
// kernel waiting for them (1.63 ms a layer from memory against 1.15 from cache; 1.25 with these).
template <int OB>
CREMA_AVX512 void GroupRows(const BlockedConvShape& s, const float* xp, const float* w,
                            const float* bias, const float* relu, float* y, int r0, int r1,
                            bool more) {
  const int in_blocks = s.in_channels / kBlock;
  const size_t xrow = static_cast<size_t>(s.width + 2) * kBlock;
  const size_t xs = (s.height + 2) * xrow;
  const size_t ys = static_cast<size_t>(s.height) * s.width * kBlock;
  const size_t ws = static_cast<size_t>(in_blocks) * kTaps * kBlock * kBlock;
  const size_t chunk = static_cast<size_t>(kTaps) * kBlock * kBlock;    // a block's, for one input
  constexpr int kLines = kTaps * kBlock * kBlock * sizeof(float) / 64;  // block's: 144
  const int row_tiles = (s.width + kPositions - 1) / kPositions;
  const int tiles = (r1 - r0) * row_tiles;
  for (int cb = 0; cb < in_blocks; ++cb) {
    const bool first = cb == 0, last = cb + 1 == in_blocks;
    const float* wc = w + cb * chunk;
    Ahead ahead;
    ahead.at = !last ? wc + chunk : more ? w + OB * ws : nullptr;
    for (int r = r0; r < r1; ++r) {
      const float* xr = xp + cb * xs + r * xrow;
      float* yr = y + static_cast<size_t>(r) * s.width * kBlock;
      for (int t = 0, p = 0; p < s.width; ++t, p += kPositions) {
        const int k = (r - r0) * row_tiles + t;  // the tile's share of the lines
        ahead.first = kLines * k / tiles;
        ahead.count = kLines * (k + 1) / tiles - ahead.first;
        if (p + kPositions <= s.width)
          Tile<OB, kPositions>(xr + p * kBlock, xrow, wc, ws, bias, yr + p * kBlock, ys, first,
                               last, relu, ahead);
        else
          WithTileWidth(s.width - p, [&](auto width) CREMA_AVX512 {
            Tile<OB, decltype(width)::value>(xr + p * kBlock, xrow, wc, ws, bias, yr + p * kBlock,
                                             ys, first, last, relu, ahead);
          });
      }
    }
  }
}

// Copies channel block cb of image n of x (blocked by 16, or plain) into its padded copy (xp,
// blocked), the border zero.
void Pad(const BlockedConvShape& s, const float* x, bool plain, int n, int cb, float* xp) {
  const size_t row = static_cast<size_t>(s.width) * kBlock, xrow = row + 2 * kBlock;
  const size_t image = static_cast<size_t>(s.height) * s.width;
  std::fill(xp, xp + xrow, 0.f);
  for (int r = 0; r < s.height; ++r) {
    float* d = xp + (r + 1) * xrow;
    std::fill(d, d + kBlock, 0.f);
    std::fill(d + kBlock + row, d + xrow, 0.f);
  }
  std::fill(xp + (s.height + 1) * xrow, xp + (s.height + 2) * xrow, 0.f);
  if (!plain) {
    const float* b = x + (static_cast<size_t>(n) * (s.in_channels / kBlock) + cb) * image * kBlock;
    for (int r = 0; r < s.height; ++r)
      std::memcpy(xp + (r + 1) * xrow + kBlock, b + r * row, row * sizeof(float));
    return;
  }
  for (int i = 0; i < kBlock; ++i) {
    const float* c = x + (static_cast<size_t>(n) * s.in_channels + cb * kBlock + i) * image;
    for (int r = 0; r < s.height; ++r)
      for (int w = 0; w < s.width; ++w)
        xp[(r + 1) * xrow + (w + 1) * kBlock + i] = c[r * s.width + w];
  }
}
#endif  // __x86_64__

size_t PaddedBlockFloats(const BlockedConvShape& s) {
  return static_cast<size_t>(s.height + 2) * (s.width + 2) * kBlock;
}

}  // namespace

bool BlockedConv3x3Applies(const BlockedConvShape& s) {
#if defined(__x86_64__)
  return CpuIsaLevel() == CpuIsa::kAvx512 && s.in_channels > 0 && s.in_channels % kBlock == 0 &&
         s.channels > 0 && s.channels % kBlock == 0 && s.height > 0 && s.width > 0;
#else
  (void)s;
  return false;
#endif
}

void PackBlockedConv3x3Weights(const BlockedConvShape& s, const float* w, float* packed) {
  const int in_blocks = s.in_channels / kBlock;
  for (int oc = 0; oc < s.channels; ++oc)
    for (int ic = 0; ic < s.in_channels; ++ic)
      for (int t = 0; t < kTaps; ++t)
        packed[(((static_cast<size_t>(oc / kBlock) * in_blocks + ic / kBlock) * kTaps + t) *
                    kBlock +
                ic % kBlock) *
                   kBlock +
               oc % kBlock] = w[(static_cast<size_t>(oc) * s.in_channels + ic) * kTaps + t];
}

size_t BlockedConv3x3ScratchFloats(const BlockedConvShape& s, int batch) {
  return static_cast<size_t>(batch) * (s.in_channels / kBlock) * PaddedBlockFloats(s) + kBlock;
}

void BlockedConv3x3Forward(const BlockedConvShape& s, int batch, const BlockedConvArgs& a) {
  CREMA_ASSERT(BlockedConv3x3Applies(s), "BlockedConv3x3Forward on this CPU or shape");
#if defined(__x86_64__)
  const int in_blocks = s.in_channels / kBlock, blocks = s.channels / kBlock;
  const size_t padded = PaddedBlockFloats(s), image = static_cast<size_t>(s.height) * s.width;
  float* xp =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(a.scratch) + 63) & ~uintptr_t{63});
  // The work in units of one output block's row: thread t takes the rows of the groups whose
  // units start in [total * t / threads, total * (t + 1) / threads), image by image, group by
  // group (a group of ob blocks' row is ob units).
  const int64_t total = int64_t{batch} * blocks * s.height;
#pragma omp parallel num_threads(std::max(a.threads, 1))
  {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < int64_t{batch} * in_blocks; ++i)
      Pad(s, a.x, a.x_plain, static_cast<int>(i / in_blocks), static_cast<int>(i % in_blocks),
          xp + i * padded);
    const ThreadShare share(total);
    for (int n = 0; n < batch; ++n)
      for (int o = 0; o < blocks;) {
        const int ob = GroupBlocks(blocks - o);
        const int64_t base = (int64_t{n} * blocks + o) * s.height;
        const int r0 = PartsFrom(share.begin, base, ob, s.height);
        const int r1 = PartsFrom(share.end, base, ob, s.height);
        if (r0 < r1) {
          const float* x = xp + static_cast<size_t>(n) * in_blocks * padded;
          const float* w = a.weights + static_cast<size_t>(o) * in_blocks * kTaps * kBlock * kBlock;
          const float* bias = a.bias != nullptr ? a.bias + o * kBlock : nullptr;
          float* y = a.y + (static_cast<size_t>(n) * blocks + o) * image * kBlock;
          const bool more = o + ob < blocks;
          if (ob == 3)
            GroupRows<3>(s, x, w, bias, a.relu, y, r0, r1, more);
          else if (ob == 2)
            GroupRows<2>(s, x, w, bias, a.relu, y, r0, r1, more);
          else
            GroupRows<1>(s, x, w, bias, a.relu, y, r0, r1, more);
        }
        o += ob;
      }
  }
#endif
}

}  // namespace crema::cpu
