#include "math/pointwise_depthwise.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "crema/error.hpp"
#include "math/blocked_avx512.hpp"
#include "math/cpu_isa.hpp"

namespace crema::cpu {
namespace {

constexpr int kBlock = 16;     // channels per block (one zmm register)
constexpr int kPositions = 7;  // positions of a row per register tile (MobileNet's widths: 7k)
// Input-channel blocks per pass over a tile: a group of three output blocks' weights for them are
// 48 KB, about L1's size (MobileNet v1 ran 0.6-2.8% faster than with 8, batch 1 and 8, 1 and 2
// threads: fewer passes over the outputs).
constexpr int kChunkBlocks = 16;

#if defined(__x86_64__)
// OB output blocks x P positions of the 1x1 convolution: x at the tile's first position of its
// first input block (blocks xs floats apart), w at the first output block's weights for that
// input block (output blocks ws floats apart), y likewise (ys apart). Starts from the bias
// (first) or from y, adds cbs input blocks, then stores, through the ReLU when `last`.
template <int OB, int P>
CREMA_AVX512 __attribute__((always_inline)) inline void PointwiseTile(
    const float* x, size_t xs, int cbs, const float* w, size_t ws, const float* bias, float* y,
    size_t ys, bool first, bool last, const float* relu, Ahead ahead) {
  __m512 acc[OB][P];
  StartTile(acc, first, bias, y, ys);
  int fetched = 0;
  for (int cb = 0; cb < cbs; ++cb) {
    ahead.Fetch<OB>(cb + 1, cbs, ws, &fetched);
    AddInputBlock(acc, x + cb * xs, w + cb * kBlock * kBlock, ws);
  }
  StoreTile(acc, last, relu, y, ys);
}

// `positions` consecutive positions of the 1x1 convolution for OB output blocks: x at the first
// in the first input block (blocks xs floats apart), w at the group's weights (blocks ws floats
// apart), y at the first in the group's first output block (blocks ys apart). Chunk by chunk of
// input blocks (their weights in L1), every tile; where `fetch`, meanwhile the next chunk's
// weights (the group's next, or `next`'s first where given: the next group's weights).
template <int OB>
CREMA_AVX512 void PointwiseSpanGroup(int in_blocks, int positions, const float* x, size_t xs,
                                     const float* w, size_t ws, const float* bias,
                                     const float* relu, float* y, size_t ys, bool fetch,
                                     const float* next) {
  constexpr int kBlockLines = kBlock * kBlock * sizeof(float) / 64;  // an input block's: 16
  const int tiles = (positions + kPositions - 1) / kPositions;
  for (int c0 = 0; c0 < in_blocks; c0 += kChunkBlocks) {
    const int cbs = std::min(kChunkBlocks, in_blocks - c0);
    const bool first = c0 == 0, last = c0 + cbs == in_blocks;
    const float* xc = x + c0 * xs;
    const float* wc = w + static_cast<size_t>(c0) * kBlock * kBlock;
    Ahead ahead;
    ahead.at = !fetch ? nullptr : !last ? wc + cbs * kBlock * kBlock : next;
    const int lines = kBlockLines * std::min(kChunkBlocks, last ? in_blocks : in_blocks - c0 - cbs);
    for (int t = 0, p = 0; p < positions; ++t, p += kPositions) {
      ahead.first = lines * t / tiles;
      ahead.count = lines * (t + 1) / tiles - ahead.first;
      if (p + kPositions <= positions)
        PointwiseTile<OB, kPositions>(xc + p * kBlock, xs, cbs, wc, ws, bias, y + p * kBlock, ys,
                                      first, last, relu, ahead);
      else
        WithTileWidth(positions - p, [&](auto width) CREMA_AVX512 {
          PointwiseTile<OB, decltype(width)::value>(xc + p * kBlock, xs, cbs, wc, ws, bias,
                                                    y + p * kBlock, ys, first, last, relu, ahead);
        });
    }
  }
}

// PointwiseSpanGroup for the `ob` output blocks from block o (w, bias and y at block 0's).
CREMA_AVX512 void PointwiseSpan(int in_blocks, int blocks, int positions, const float* x, size_t xs,
                                const float* w, const float* bias, const float* relu, float* y,
                                size_t ys, int o, int ob, bool fetch) {
  const size_t ws = static_cast<size_t>(in_blocks) * kBlock * kBlock;
  const float* wo = w + o * ws;
  const float* next = o + ob < blocks ? wo + ob * ws : nullptr;
  if (bias != nullptr) bias += o * kBlock;
  y += o * ys;
  if (ob == 3)
    PointwiseSpanGroup<3>(in_blocks, positions, x, xs, wo, ws, bias, relu, y, ys, fetch, next);
  else if (ob == 2)
    PointwiseSpanGroup<2>(in_blocks, positions, x, xs, wo, ws, bias, relu, y, ys, fetch, next);
  else
    PointwiseSpanGroup<1>(in_blocks, positions, x, xs, wo, ws, bias, relu, y, ys, fetch, next);
}

// Row r of the 1x1 convolution's output for `ob` blocks from block o, into `row` ([blocks][width]
// [16]).
CREMA_AVX512 void PointwiseRow(const PointwiseDepthwiseShape& s, const float* x, int r, int o,
                               int ob, const PointwiseDepthwiseArgs& a, float* row) {
  PointwiseSpan(s.in_channels / kBlock, s.channels / kBlock, s.width,
                x + static_cast<size_t>(r) * s.width * kBlock,
                static_cast<size_t>(s.height) * s.width * kBlock, a.pointwise, a.pointwise_bias,
                a.pointwise_relu, row, static_cast<size_t>(s.width) * kBlock, o, ob, false);
}

// One output row of one channel block of the depthwise convolution: rows[kh] is the input row
// ro * S - 1 + kh of this block ([width][16]), or null above or below the image. Inside the
// image U outputs at a time: each input vector of a row is loaded once and multiplied into the
// outputs it reaches; every output still adds its taps row by row, left to right.
template <int S>
CREMA_AVX512 void DepthwiseRow(const float* const rows[3], int width, int out_width, const float* k,
                               const float* bias, const float* relu, float* y) {
  constexpr int U = 8;
  const __m512 b = bias != nullptr ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 slope = _mm512_set1_ps(relu != nullptr ? *relu : 0.f);
  __m512 kv[9];
  for (int t = 0; t < 9; ++t) kv[t] = _mm512_loadu_ps(k + t * kBlock);
  const auto store = [&](int ow, __m512 v) CREMA_AVX512 {
    _mm512_storeu_ps(y + ow * kBlock, relu != nullptr ? Relu16(v, slope) : v);
  };
  // At the left and right edges, taps outside the image are skipped.
  const auto one = [&](int ow) CREMA_AVX512 {
    __m512 acc = b;
    for (int kh = 0; kh < 3; ++kh) {
      if (rows[kh] == nullptr) continue;
      for (int kw = 0; kw < 3; ++kw) {
        const int c = ow * S - 1 + kw;
        if (c < 0 || c >= width) continue;
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(rows[kh] + c * kBlock), kv[kh * 3 + kw], acc);
      }
    }
    store(ow, acc);
  };
  int ow = 0;
  for (; ow < out_width && ow * S - 1 < 0; ++ow) one(ow);
  for (; ow + U <= out_width && (ow + U - 1) * S + 1 < width; ow += U) {
    __m512 acc[U];
    for (int u = 0; u < U; ++u) acc[u] = b;
    for (int kh = 0; kh < 3; ++kh) {
      if (rows[kh] == nullptr) continue;
      const float* r = rows[kh] + (ow * S - 1) * kBlock;
#pragma GCC unroll 32
      for (int j = 0; j < (U - 1) * S + 3; ++j) {
        const __m512 v = _mm512_loadu_ps(r + j * kBlock);
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
          const int t = j - kw;  // input j is tap kw of output t / S
          if (t >= 0 && t % S == 0 && t / S < U)
            acc[t / S] = _mm512_fmadd_ps(v, kv[kh * 3 + kw], acc[t / S]);
        }
      }
    }
    for (int u = 0; u < U; ++u) store(ow + u, acc[u]);
  }
  for (; ow < out_width; ++ow) one(ow);
}

// Output rows [begin, end) of the images' rows numbered together (image n's row ro is
// n * out_height + ro), with `ring` holding three rows of the 1x1 convolution's output.
template <int S>
CREMA_AVX512 void Rows(const PointwiseDepthwiseShape& s, const PointwiseDepthwiseArgs& a,
                       int64_t begin, int64_t end, float* ring) {
  const int oh = s.out_height(), ow = s.out_width(), blocks = s.channels / kBlock;
  const size_t row_floats = static_cast<size_t>(blocks) * s.width * kBlock;
  const size_t x_image = static_cast<size_t>(s.in_channels) * s.height * s.width;
  const size_t y_image = static_cast<size_t>(s.channels) * oh * ow;
  int image = -1, have = -1;  // the image in the ring, and its last row computed there
  for (int64_t i = begin; i < end; ++i) {
    const int n = static_cast<int>(i / oh), ro = static_cast<int>(i % oh);
    if (n != image) image = n, have = -1;
    const float* x = a.x + n * x_image;
    const int lo = ro * S - 1, hi = std::min(ro * S + 1, s.height - 1);
    const int first = std::max({lo, have + 1, 0});
    have = hi;
    float* y = a.y + n * y_image + static_cast<size_t>(ro) * ow * kBlock;
    // A group's new rows, then its blocks' output row, while those rows are in L1.
    for (int o = 0; o < blocks;) {
      const int ob = GroupBlocks(blocks - o);
      for (int r = first; r <= hi; ++r)
        PointwiseRow(s, x, r, o, ob, a, ring + (r % 3) * row_floats);
      for (int cb = o; cb < o + ob; ++cb) {
        const float* rows[3];
        for (int kh = 0; kh < 3; ++kh) {
          const int r = lo + kh;
          rows[kh] = r < 0 || r >= s.height
                         ? nullptr
                         : ring + (r % 3) * row_floats + static_cast<size_t>(cb) * s.width * kBlock;
        }
        const float* bias = a.depthwise_bias != nullptr ? a.depthwise_bias + cb * kBlock : nullptr;
        DepthwiseRow<S>(rows, s.width, ow, a.depthwise + cb * 9 * kBlock, bias, a.depthwise_relu,
                        y + static_cast<size_t>(cb) * oh * ow * kBlock);
      }
      o += ob;
    }
  }
}

// Output rows [begin, end) of the depthwise convolution alone, the images' channel blocks' rows
// numbered together (plane p = image * blocks + block, its row ro is p * out_height + ro).
template <int S>
CREMA_AVX512 void DepthwiseAloneRows(const PointwiseDepthwiseShape& s, const AloneArgs& a,
                                     int64_t begin, int64_t end) {
  const int oh = s.out_height(), ow = s.out_width(), blocks = s.channels / kBlock;
  const size_t plane = static_cast<size_t>(s.height) * s.width * kBlock;
  const size_t out_plane = static_cast<size_t>(oh) * ow * kBlock;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t p = i / oh;
    const int ro = static_cast<int>(i % oh), cb = static_cast<int>(p % blocks);
    const float* x = a.x + p * plane;
    const float* rows[3];
    for (int kh = 0; kh < 3; ++kh) {
      const int r = ro * S - 1 + kh;
      rows[kh] = r < 0 || r >= s.height ? nullptr : x + static_cast<size_t>(r) * s.width * kBlock;
    }
    DepthwiseRow<S>(rows, s.width, ow, a.weights + cb * 9 * kBlock,
                    a.bias != nullptr ? a.bias + cb * kBlock : nullptr, a.relu,
                    a.y + p * out_plane + static_cast<size_t>(ro) * ow * kBlock);
  }
}
#endif  // __x86_64__

// One core's L2 cache (sysconf; 1 MiB when unknown).
size_t L2Bytes() {
  static const size_t l2 = [] {
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? static_cast<size_t>(bytes) : size_t{1} << 20;
  }();
  return l2;
}

}  // namespace

bool PointwiseDepthwiseApplies(const PointwiseDepthwiseShape& s) {
#if defined(__x86_64__)
  return CpuIsaLevel() == CpuIsa::kAvx512 && s.in_channels > 0 && s.in_channels % kBlock == 0 &&
         s.channels > 0 && s.channels % kBlock == 0 && s.height > 0 && s.width > 0 &&
         (s.stride == 1 || s.stride == 2);
#else
  (void)s;
  return false;
#endif
}

bool PointwiseDepthwiseGains(const PointwiseDepthwiseShape& s) {
  return static_cast<size_t>(s.channels) * s.height * s.width * sizeof(float) > L2Bytes() / 2;
}

void PackPointwiseWeights(const PointwiseDepthwiseShape& s, const float* w, float* packed) {
  const int in_blocks = s.in_channels / kBlock;
  for (int oc = 0; oc < s.channels; ++oc)
    for (int ic = 0; ic < s.in_channels; ++ic)
      packed[((static_cast<size_t>(oc / kBlock) * in_blocks + ic / kBlock) * kBlock + ic % kBlock) *
                 kBlock +
             oc % kBlock] = w[static_cast<size_t>(oc) * s.in_channels + ic];
}

void PackDepthwiseWeights(const PointwiseDepthwiseShape& s, const float* w, float* packed) {
  for (int c = 0; c < s.channels; ++c)
    for (int t = 0; t < 9; ++t)
      packed[(static_cast<size_t>(c / kBlock) * 9 + t) * kBlock + c % kBlock] = w[c * 9 + t];
}

size_t PointwiseDepthwiseScratchFloats(const PointwiseDepthwiseShape& s, int threads) {
  return static_cast<size_t>(std::max(threads, 1)) * 3 * s.channels * s.width + kBlock;
}

void PointwiseDepthwiseForward(const PointwiseDepthwiseShape& s, int batch,
                               const PointwiseDepthwiseArgs& a) {
  CREMA_ASSERT(PointwiseDepthwiseApplies(s), "PointwiseDepthwiseForward on this CPU or shape");
#if defined(__x86_64__)
  const size_t ring_floats = static_cast<size_t>(3) * s.channels * s.width;
  float* scratch =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(a.scratch) + 63) & ~uintptr_t{63});
  const int64_t rows = int64_t{batch} * s.out_height();
#pragma omp parallel num_threads(std::max(a.threads, 1))
  {
    const ThreadShare share(rows);
    float* ring = scratch + share.thread * ring_floats;
    if (s.stride == 1)
      Rows<1>(s, a, share.begin, share.end, ring);
    else
      Rows<2>(s, a, share.begin, share.end, ring);
  }
#endif
}

void DepthwiseForward(const PointwiseDepthwiseShape& s, int batch, const AloneArgs& a) {
  CREMA_ASSERT(PointwiseDepthwiseApplies(s) && s.in_channels == s.channels,
               "DepthwiseForward on this CPU or shape");
#if defined(__x86_64__)
  const int64_t rows = int64_t{batch} * (s.channels / kBlock) * s.out_height();
#pragma omp parallel num_threads(std::max(a.threads, 1))
  {
    const ThreadShare share(rows);
    if (s.stride == 1)
      DepthwiseAloneRows<1>(s, a, share.begin, share.end);
    else
      DepthwiseAloneRows<2>(s, a, share.begin, share.end);
  }
#endif
}

bool PointwiseApplies(int in_channels, int channels, int positions) {
  return PointwiseDepthwiseApplies({in_channels, channels, 1, positions, 1});
}

void PointwiseForward(int in_channels, int channels, int positions, int batch, const AloneArgs& a) {
  CREMA_ASSERT(PointwiseApplies(in_channels, channels, positions),
               "PointwiseForward on this CPU or shape");
#if defined(__x86_64__)
  const int in_blocks = in_channels / kBlock, blocks = channels / kBlock;
  // Positions in spans whose input (all channels) fits in half of L2, so that the spans' input
  // blocks stay there while every group of output blocks reads them.
  const size_t fit = L2Bytes() / 2 / (static_cast<size_t>(in_channels) * sizeof(float));
  const int span = static_cast<int>(
      std::min<size_t>(positions, std::max<size_t>(kPositions, fit / kPositions * kPositions)));
  const int span_tiles = span / kPositions + (span % kPositions != 0);  // (the last span's fewer)
  const int tiles = (positions + kPositions - 1) / kPositions;          // of an image
  const size_t stride = static_cast<size_t>(positions) * kBlock;        // between channel blocks
  // The work in units of one output block's tile: thread t takes the tiles of the groups whose
  // units start in [total * t / threads, total * (t + 1) / threads), span by span, group by
  // group, image by image (a group's weights used by every image in turn; a group of ob blocks'
  // tile is ob units).
  const int64_t total = int64_t{batch} * tiles * blocks;
#pragma omp parallel num_threads(std::max(a.threads, 1))
  {
    const ThreadShare share(total);
    for (int k0 = 0; k0 < tiles; k0 += span_tiles) {
      const int k_count = std::min(span_tiles, tiles - k0);
      for (int o = 0; o < blocks;) {
        const int ob = GroupBlocks(blocks - o);
        for (int n = 0; n < batch; ++n) {
          const int64_t base =
              (int64_t{k0} * blocks + int64_t{o} * k_count) * batch + int64_t{n} * ob * k_count;
          const int first = PartsFrom(share.begin, base, ob, k_count);
          const int last = PartsFrom(share.end, base, ob, k_count);
          if (first < last) {
            const int p = (k0 + first) * kPositions;
            const int count = std::min((k0 + last) * kPositions, positions) - p;
            PointwiseSpan(in_blocks, blocks, count, a.x + n * in_blocks * stride + p * kBlock,
                          stride, a.weights, a.bias, a.relu, a.y + n * blocks * stride + p * kBlock,
                          stride, o, ob, true);
          }
        }
        o += ob;
      }
    }
  }
#endif
}

}  // namespace crema::cpu
