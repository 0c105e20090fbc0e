// The GPU twins of depthwise_conv.cpp (declared in depthwise_conv.hpp). An output (or input-diff)
// element sums its taps in the order ky, kx (m before them for the input diff), starting from the
// bias, as the CPU loops add them. 3x3 kernels are unrolled at compile time; index math is 32-bit
// (FastDivider) where the blob fits.
#include "layers/convolution/depthwise_conv.hpp"
#include "math/channel_gpu.cuh"

namespace crema {
namespace {

using gpu::FastDivider;

// The (image, channel, y, x) of element `index` of an (images, channels, height, width) blob.
struct Coords {
  int x, y, channel;
  uint32_t image;
};
struct CoordDividers {
  FastDivider width, height, channels;
  CoordDividers(int w, int h, int c)
      : width(static_cast<uint32_t>(w)),
        height(static_cast<uint32_t>(h)),
        channels(static_cast<uint32_t>(c)) {}
  __device__ Coords Of(uint32_t index) const {
    const uint32_t row = width.Div(index);
    const uint32_t plane = height.Div(row);
    const uint32_t image = channels.Div(plane);
    return {static_cast<int>(index - row * width.divisor),
            static_cast<int>(row - plane * height.divisor),
            static_cast<int>(plane - image * channels.divisor), image};
  }
};

// KH, KW > 0: the kernel size at compile time; 0: read from the shape.
template <typename T, int KH, int KW>
__global__ void ForwardKernel(uint32_t n, DepthwiseShape s, CoordDividers at,
                              const T* __restrict__ bottom, const T* __restrict__ weight,
                              const T* __restrict__ bias, bool relu, T slope, T* __restrict__ top) {
  const int kernel_h = KH > 0 ? KH : s.kernel_h, kernel_w = KW > 0 ? KW : s.kernel_w;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  for (uint32_t index = blockIdx.x * blockDim.x + threadIdx.x; index < n;
       index += blockDim.x * gridDim.x) {
    const Coords e = at.Of(index);
    const int o = e.channel;
    const T* in =
        bottom + (static_cast<int64_t>(e.image) * s.channels + o / s.multiplier) * in_plane;
    const T* w = weight + o * kernel_h * kernel_w;
    const int y0 = e.y * s.stride_h - s.pad_h, x0 = e.x * s.stride_w - s.pad_w;
    T sum = bias != nullptr ? bias[o] : T(0);
#pragma unroll
    for (int ky = 0; ky < kernel_h; ++ky) {
      const int in_y = y0 + ky * s.dilation_h;
      if (in_y < 0 || in_y >= s.height) continue;
#pragma unroll
      for (int kx = 0; kx < kernel_w; ++kx) {
        const int in_x = x0 + kx * s.dilation_w;
        if (in_x < 0 || in_x >= s.width) continue;
        sum += w[ky * kernel_w + kx] * in[in_y * s.width + in_x];
      }
    }
    top[index] = relu ? gpu::ReLUForwardValue(sum, slope) : sum;
  }
}

// The output index along one axis whose tap at `offset` (= pad - k * dilation, from the input
// position) reads input position `pos`, or -1.
__device__ __forceinline__ int TapOutput(int pos, int offset, int stride, int out_size) {
  const int shifted = pos + offset;
  if (shifted < 0 || shifted % stride != 0) return -1;
  const int out = shifted / stride;
  return out < out_size ? out : -1;
}

// One thread per input element, gathering the taps of the `multiplier` output planes that read it.
template <typename T, int KH, int KW>
__global__ void BackwardDataKernel(uint32_t n, DepthwiseShape s, CoordDividers at,
                                   const T* __restrict__ top_diff, const T* __restrict__ weight,
                                   T* __restrict__ bottom_diff) {
  const int kernel_h = KH > 0 ? KH : s.kernel_h, kernel_w = KW > 0 ? KW : s.kernel_w;
  const int num_output = s.channels * s.multiplier;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  for (uint32_t index = blockIdx.x * blockDim.x + threadIdx.x; index < n;
       index += blockDim.x * gridDim.x) {
    const Coords e = at.Of(index);
    T sum = T(0);
    for (int m = 0; m < s.multiplier; ++m) {
      const int o = e.channel * s.multiplier + m;
      const T* out_diff = top_diff + (static_cast<int64_t>(e.image) * num_output + o) * out_plane;
      const T* w = weight + o * kernel_h * kernel_w;
#pragma unroll
      for (int ky = 0; ky < kernel_h; ++ky) {
        const int y = TapOutput(e.y, s.pad_h - ky * s.dilation_h, s.stride_h, s.out_height);
        if (y < 0) continue;
#pragma unroll
        for (int kx = 0; kx < kernel_w; ++kx) {
          const int x = TapOutput(e.x, s.pad_w - kx * s.dilation_w, s.stride_w, s.out_width);
          if (x < 0) continue;
          sum += w[ky * kernel_w + kx] * out_diff[y * s.out_width + x];
        }
      }
    }
    bottom_diff[index] = sum;
  }
}

// Any kernel size: one block per weight element (o, ky, kx), its threads striding over the
// (image, y, x) outputs, their partial sums (double) added in a fixed tree.
template <typename T>
__global__ void BackwardWeightKernel(DepthwiseShape s, const T* top_diff, const T* bottom,
                                     T* weight_diff) {
  __shared__ double shared[gpu::kThreads];
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int kernel_volume = s.kernel_h * s.kernel_w;
  const int64_t weights = static_cast<int64_t>(num_output) * kernel_volume;
  const int64_t positions = s.num * out_plane;
  for (int64_t wi = blockIdx.x; wi < weights; wi += gridDim.x) {
    const int o = static_cast<int>(wi / kernel_volume);
    const int k = static_cast<int>(wi % kernel_volume);
    const int row_offset = (k / s.kernel_w) * s.dilation_h - s.pad_h;
    const int col_offset = (k % s.kernel_w) * s.dilation_w - s.pad_w;
    const int c = o / s.multiplier;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < positions; j += blockDim.x) {
      const int64_t image = j / out_plane;
      const int64_t r = j % out_plane;
      const int in_y = static_cast<int>(r / s.out_width) * s.stride_h + row_offset;
      const int in_x = static_cast<int>(r % s.out_width) * s.stride_w + col_offset;
      if (in_y < 0 || in_y >= s.height || in_x < 0 || in_x >= s.width) continue;
      sum +=
          static_cast<double>(top_diff[(image * num_output + o) * out_plane + r]) *
          bottom[(image * s.channels + c) * in_plane + static_cast<int64_t>(in_y) * s.width + in_x];
    }
    shared[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = gpu::kThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) weight_diff[wi] += static_cast<T>(shared[0]);
    __syncthreads();
  }
}

// 3x3: the nine weight gradients of an output channel in one pass over its outputs, as per-channel
// sums (gpu::ChannelSums: segments of the (image, y, x) positions over many blocks).
template <typename T>
void BackwardWeight3x3(const DepthwiseShape& s, const T* top_diff, const T* bottom,
                       T* weight_diff) {
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const FastDivider out_width(static_cast<uint32_t>(s.out_width));
  gpu::ChannelSums<9>(
      "depthwise convolution weight backward", s.num, num_output,
      static_cast<int64_t>(s.out_height) * s.out_width,
      [=] __device__(const gpu::ChannelElement& e, double* v) {
        const uint32_t y = out_width.Div(static_cast<uint32_t>(e.inner));
        const int x = static_cast<int>(e.inner - y * out_width.divisor);
        const int y0 = static_cast<int>(y) * s.stride_h - s.pad_h, x0 = x * s.stride_w - s.pad_w;
        const double dy = top_diff[e.k];
        const T* in =
            bottom + (e.outer * s.channels + static_cast<int>(e.channel) / s.multiplier) * in_plane;
#pragma unroll
        for (int ky = 0; ky < 3; ++ky) {
          const int in_y = y0 + ky * s.dilation_h;
#pragma unroll
          for (int kx = 0; kx < 3; ++kx) {
            const int in_x = x0 + kx * s.dilation_w;
            const bool inside = in_y >= 0 && in_y < s.height && in_x >= 0 && in_x < s.width;
            v[ky * 3 + kx] = inside ? dy * in[in_y * s.width + in_x] : 0.0;
          }
        }
      },
      [=] __device__(int64_t o, const double* sums) {
        for (int q = 0; q < 9; ++q) weight_diff[o * 9 + q] += static_cast<T>(sums[q]);
      });
}

bool Is3x3(const DepthwiseShape& s) { return s.kernel_h == 3 && s.kernel_w == 3; }

// Whether an (images, channels, height, width) blob's indices fit the 32-bit kernels.
bool Fits32(int64_t n) { return n < (int64_t{1} << 31); }

}  // namespace

bool DepthwiseConvFitsGpu(const DepthwiseShape& s) {
  const int64_t outputs = s.num * s.channels * s.multiplier * s.out_height * s.out_width;
  const int64_t inputs = s.num * s.channels * s.height * s.width;
  return Fits32(outputs) && Fits32(inputs);
}

template <typename T>
void DepthwiseConvForwardGpu(const DepthwiseShape& s, const T* bottom, const T* weight,
                             const T* bias, T* top, bool relu, T negative_slope) {
  const int64_t n = s.num * s.channels * s.multiplier * s.out_height * s.out_width;
  if (n == 0) return;
  const CoordDividers at(s.out_width, s.out_height, s.channels * s.multiplier);
  if (Is3x3(s))
    ForwardKernel<T, 3, 3><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        static_cast<uint32_t>(n), s, at, bottom, weight, bias, relu, negative_slope, top);
  else
    ForwardKernel<T, 0, 0><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        static_cast<uint32_t>(n), s, at, bottom, weight, bias, relu, negative_slope, top);
  gpu::CheckLaunch("depthwise convolution forward");
}

template <typename T>
void DepthwiseConvBackwardDataGpu(const DepthwiseShape& s, const T* top_diff, const T* weight,
                                  T* bottom_diff) {
  const int64_t n = s.num * s.channels * s.height * s.width;
  if (n == 0) return;
  const CoordDividers at(s.width, s.height, s.channels);
  if (Is3x3(s))
    BackwardDataKernel<T, 3, 3><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        static_cast<uint32_t>(n), s, at, top_diff, weight, bottom_diff);
  else
    BackwardDataKernel<T, 0, 0><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        static_cast<uint32_t>(n), s, at, top_diff, weight, bottom_diff);
  gpu::CheckLaunch("depthwise convolution data backward");
}

template <typename T>
void DepthwiseConvBackwardWeightGpu(const DepthwiseShape& s, const T* top_diff, const T* bottom,
                                    T* weight_diff) {
  if (s.num * s.out_height * s.out_width == 0) return;
  if (Is3x3(s)) {
    BackwardWeight3x3(s, top_diff, bottom, weight_diff);
    return;
  }
  const int64_t weights = static_cast<int64_t>(s.channels) * s.multiplier * s.kernel_h * s.kernel_w;
  BackwardWeightKernel<T>
      <<<static_cast<int>(weights < 65535 ? weights : 65535), gpu::kThreads, 0, gpu::Stream()>>>(
          s, top_diff, bottom, weight_diff);
  gpu::CheckLaunch("depthwise convolution weight backward");
}

#define CREMA_INSTANTIATE_DEPTHWISE_GPU(T)                                                      \
  template void DepthwiseConvForwardGpu<T>(const DepthwiseShape&, const T*, const T*, const T*, \
                                           T*, bool, T);                                        \
  template void DepthwiseConvBackwardDataGpu<T>(const DepthwiseShape&, const T*, const T*, T*); \
  template void DepthwiseConvBackwardWeightGpu<T>(const DepthwiseShape&, const T*, const T*, T*);
CREMA_INSTANTIATE_DEPTHWISE_GPU(float)
CREMA_INSTANTIATE_DEPTHWISE_GPU(double)
#undef CREMA_INSTANTIATE_DEPTHWISE_GPU

}  // namespace crema
