#include "layers/lrn/lrn_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// The geometry of one LRN pass; `index` runs over N x C x H x W.
struct Window {
  int channels, height, width, half;
  bool across_channels;
};

// Sum of f(j) over the window around `index`, in the CPU's order (ascending channel, or rows then
// columns), starting from 0.
template <typename T, typename F>
__device__ T WindowSum(const Window& g, int64_t index, F f) {
  const int64_t plane = static_cast<int64_t>(g.height) * g.width;
  const int64_t p = index % plane;
  const int64_t nc = index / plane;
  T sum = 0;
  if (g.across_channels) {
    const int c = static_cast<int>(nc % g.channels);
    const int64_t first = index - c * plane;  // channel 0 at this position
    const int begin = max(0, c - g.half), end = min(g.channels - 1, c + g.half);
    for (int cc = begin; cc <= end; ++cc) sum += f(first + cc * plane);
    return sum;
  }
  const int h = static_cast<int>(p / g.width), w = static_cast<int>(p % g.width);
  const int64_t image = nc * plane;
  const int h_end = min(g.height - 1, h + g.half), w_end = min(g.width - 1, w + g.half);
  for (int hh = max(0, h - g.half); hh <= h_end; ++hh)
    for (int ww = max(0, w - g.half); ww <= w_end; ++ww) sum += f(image + hh * g.width + ww);
  return sum;
}

// s = base + coeff * window sum of x^2; y = x * s^-beta. One thread per element.
template <typename T>
__global__ void LRNForward(int64_t n, Window g, const T* x, T base, T coeff, T neg_beta, T* scale,
                           T* y) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const T sum = WindowSum<T>(g, index, [x](int64_t j) {
      const T square = x[j] * x[j];
      return square;
    });
    const T s = base + coeff * sum;
    scale[index] = s;
    y[index] = x[index] * pow(s, neg_beta);
  }
}

// dx = dy * s^-beta - coeff * x * window sum of dy * y / s.
template <typename T>
__global__ void LRNBackward(int64_t n, Window g, const T* x, const T* y, const T* dy,
                            const T* scale, T coeff, T neg_beta, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const T sum = WindowSum<T>(g, index, [y, dy, scale](int64_t j) {
      const T ratio = dy[j] * y[j] / scale[j];
      return ratio;
    });
    dx[index] = dy[index] * pow(scale[index], neg_beta) - coeff * x[index] * sum;
  }
}

}  // namespace

void LRNLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  const Window g{channels_, height_, width_, (size_ - 1) / 2, across_channels_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T base = static_cast<T>(across_channels_ ? k_ : 1.0);
    const T coeff = static_cast<T>(across_channels_ ? alpha_ / size_ : alpha_ / (size_ * size_));
    LRNForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, g, bottom[0]->gpu_data<T>(), base, coeff, static_cast<T>(-beta_),
        scale_.mutable_gpu_data<T>(), top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("LRN forward");
}

void LRNLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const Window g{channels_, height_, width_, (size_ - 1) / 2, across_channels_};
  const double norm = across_channels_ ? size_ : size_ * size_;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    LRNBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, g, bottom[0]->gpu_data<T>(), top[0]->gpu_data<T>(), top[0]->gpu_diff<T>(),
        scale_.gpu_data<T>(), static_cast<T>(2 * alpha_ * beta_ / norm), static_cast<T>(-beta_),
        bottom[0]->mutable_gpu_diff<T>());
  });
  gpu::CheckLaunch("LRN backward");
}

}  // namespace crema
