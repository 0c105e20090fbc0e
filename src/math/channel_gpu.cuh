#pragma once
// Per-channel GPU kernels over blobs laid out (outer, channels, inner) (NCHW: N, C, H * W), for
// .cu files:
//   ChannelSums<K>: per channel, K sums in double of values a functor computes per element, in an
//     order that depends on the shape only (deterministic, no atomics). Each channel's
//     outer * inner elements are cut into segments (SumSegments), one block sums a segment in a
//     fixed tree, and a second kernel adds the segments in order and hands the channel's K sums to
//     a finishing functor. Sum q of a channel has the same bits whatever K is and whatever the
//     other sums are, so a fused kernel computing several layers' sums in one pass matches the
//     layers run one by one.
//   ChannelMap: f(k, c) for every element k, c its channel (32-bit index math where it fits).
//   ReLUForwardValue, ReLUBackwardValue: Caffe's ReLU, for the ReLU layer and fused ReLUs.
//   MulRn, AddRn, SubRn: arithmetic that is never contracted into a fused multiply-add, for
//     values that fused and unfused kernels (and the CPU) must compute bit for bit alike.
#include <cstdint>

#include "math/math_gpu.hpp"

namespace crema::gpu {

__device__ __forceinline__ float MulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double MulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float AddRn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double AddRn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float SubRn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double SubRn(double a, double b) { return __dsub_rn(a, b); }

// Caffe's ReLU (relu_layer.cu): the ReLU layer and every layer a ReLU is fused into use this
// expression, so that fused and unfused give the same bits. And the factor of its gradient,
// read off its output (in place) or input: both have the sign of x for a slope >= 0.
template <typename T>
__device__ __forceinline__ T ReLUForwardValue(T x, T negative_slope) {
  return x > T(0) ? x : x * negative_slope;
}
template <typename T>
__device__ __forceinline__ T ReLUBackwardValue(T dy, T y, T negative_slope) {
  return dy * (y > T(0) ? T(1) : negative_slope);
}

// n / d for 0 <= n < 2^31 by a multiply-high and a shift (Granlund and Montgomery's method, as
// PyTorch's IntDivider), d >= 1.
struct FastDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;
  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    for (shift = 0; shift < 32; ++shift)
      if ((uint64_t{1} << shift) >= d) break;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t Div(uint32_t n) const {
    return (__umulhi(n, magic) + n) >> shift;
  }
};

constexpr int kSumThreads = 256;

// An element of an (outer, channels, inner) blob: its index k = (outer * channels + channel) *
// inner + inner_index.
struct ChannelElement {
  int64_t k, outer, channel, inner;
};

// Segments per channel: about 1024 blocks in all (a few per SM of any current GPU), each summing
// at least 4096 elements. A function of the shape only, so sums do not depend on the GPU.
inline int64_t SumSegments(int64_t channels, int64_t m) {
  constexpr int64_t kTargetBlocks = 1024, kMinSegment = 4096;
  int64_t segments = (kTargetBlocks + channels - 1) / channels;
  const int64_t most = (m + kMinSegment - 1) / kMinSegment;
  if (segments > most) segments = most;
  return segments < 1 ? 1 : segments;
}

// Sums v over the block in a fixed order (warp shuffles, then the warps' sums); the result is
// valid in thread 0.
template <int K>
__device__ __forceinline__ void BlockSums(double (&v)[K], double (*shared)[kSumThreads / 32]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int q = 0; q < K; ++q) {
    for (int offset = 16; offset > 0; offset /= 2) v[q] += __shfl_down_sync(~0u, v[q], offset);
    if (lane == 0) shared[q][warp] = v[q];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int q = 0; q < K; ++q) {
      v[q] = lane < kSumThreads / 32 ? shared[q][lane] : 0.0;
      for (int offset = 16; offset > 0; offset /= 2) v[q] += __shfl_down_sync(~0u, v[q], offset);
    }
  }
  __syncthreads();  // `shared` is free for the next call
}

// Block b sums segment b % segments of channel b / segments into partial[b * K + q]. A thread
// takes the segment's elements j, j + kSumThreads, ... (j = o * inner + i, element
// (o * channels + c) * inner + i), stepping o, i and the element index without dividing.
template <int K, typename F>
__global__ void ChannelPartialSums(int64_t outer, int64_t channels, int64_t inner, int64_t segments,
                                   int64_t segment_size, F f, double* partial) {
  __shared__ double shared[K][kSumThreads / 32];
  const int64_t m = outer * inner;
  const int64_t plane = channels * inner;
  const int64_t step_o = inner > 0 ? kSumThreads / inner : 0;
  const int64_t step_i = inner > 0 ? kSumThreads % inner : 0;
  for (int64_t b = blockIdx.x; b < channels * segments; b += gridDim.x) {
    const int64_t c = b / segments;
    const int64_t j0 = (b % segments) * segment_size;
    const int64_t j1 = j0 + segment_size < m ? j0 + segment_size : m;
    double acc[K];
#pragma unroll
    for (int q = 0; q < K; ++q) acc[q] = 0;
    int64_t j = j0 + threadIdx.x;
    if (j < j1) {
      ChannelElement e{0, j / inner, c, j % inner};
      e.k = (e.outer * channels + c) * inner + e.inner;
#pragma unroll 4
      for (; j < j1; j += kSumThreads) {
        double v[K];
        f(e, v);
#pragma unroll
        for (int q = 0; q < K; ++q) acc[q] += v[q];
        e.outer += step_o;
        e.inner += step_i;
        e.k += step_o * plane + step_i;
        if (e.inner >= inner) {
          ++e.outer;
          e.inner -= inner;
          e.k += plane - inner;
        }
      }
    }
    BlockSums<K>(acc, shared);
    if (threadIdx.x == 0)
#pragma unroll
      for (int q = 0; q < K; ++q) partial[b * K + q] = acc[q];
  }
}

template <int K, typename Finish>
__global__ void ChannelFinish(int64_t channels, int64_t segments, const double* partial,
                              Finish finish) {
  CREMA_CUDA_KERNEL_LOOP(c, channels) {
    double sums[K];
#pragma unroll
    for (int q = 0; q < K; ++q) sums[q] = 0;
    for (int64_t s = 0; s < segments; ++s)
#pragma unroll
      for (int q = 0; q < K; ++q) sums[q] += partial[(c * segments + s) * K + q];
    finish(c, sums);
  }
}

// For each channel c: sums[q] = the sum over its elements e of v[q], where f(e, v) (a device
// functor taking a ChannelElement) fills double v[K]; then finish(c, sums) (a device functor,
// e.g. writing the channel's results).
// `what` names the kernels in errors.
template <int K, typename F, typename Finish>
void ChannelSums(const char* what, int64_t outer, int64_t channels, int64_t inner, F f,
                 Finish finish) {
  if (channels <= 0) return;
  const int64_t m = outer * inner;
  const int64_t segments = SumSegments(channels, m);
  const int64_t segment_size = m > 0 ? (m + segments - 1) / segments : 0;
  double* partial = static_cast<double*>(
      DeviceScratch(Scratch::kReduction, channels * segments * K * sizeof(double)));
  const int64_t blocks = channels * segments;
  ChannelPartialSums<K>
      <<<static_cast<int>(blocks < 65535 ? blocks : 65535), kSumThreads, 0, Stream()>>>(
          outer, channels, inner, segments, segment_size, f, partial);
  CheckLaunch(what);
  ChannelFinish<K>
      <<<Blocks(channels), kThreads, 0, Stream()>>>(channels, segments, partial, finish);
  CheckLaunch(what);
}

template <typename F>
__global__ void ChannelMap32(uint32_t n, FastDivider inner, FastDivider channels, F f) {
  for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += blockDim.x * gridDim.x) {
    const uint32_t plane = inner.Div(k);
    f(static_cast<int64_t>(k),
      static_cast<int64_t>(plane - channels.Div(plane) * channels.divisor));
  }
}

template <typename F>
__global__ void ChannelMap64(int64_t n, int64_t inner, int64_t channels, F f) {
  CREMA_CUDA_KERNEL_LOOP(k, n) { f(k, (k / inner) % channels); }
}

// f(k, c) for every element k < outer * channels * inner, c = (k / inner) % channels.
template <typename F>
void ChannelMap(const char* what, int64_t outer, int64_t channels, int64_t inner, F f) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  if (n < (int64_t{1} << 31))
    ChannelMap32<<<Blocks(n), kThreads, 0, Stream()>>>(
        static_cast<uint32_t>(n), FastDivider(static_cast<uint32_t>(inner)),
        FastDivider(static_cast<uint32_t>(channels)), f);
  else
    ChannelMap64<<<Blocks(n), kThreads, 0, Stream()>>>(n, inner, channels, f);
  CheckLaunch(what);
}

}  // namespace crema::gpu
