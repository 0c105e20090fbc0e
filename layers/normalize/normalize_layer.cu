#include "layers/normalize/normalize_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

struct NormalizeGeometry {
  int64_t count;
  int channels;
  int64_t spatial;
  bool across_spatial;
  bool channel_shared;
};

NormalizeGeometry MakeGeometry(const Blob& bottom, bool across_spatial, bool channel_shared) {
  return {bottom.count(), bottom.shape(1), bottom.count(2), across_spatial, channel_shared};
}

// The norm (and the scale) that apply to element i.
__device__ int64_t NormIndex(const NormalizeGeometry& g, int64_t i) {
  const int64_t n = i / (g.channels * g.spatial);
  return g.across_spatial ? n : n * g.spatial + i % g.spatial;
}
__device__ int ScaleIndex(const NormalizeGeometry& g, int64_t i) {
  return g.channel_shared ? 0 : static_cast<int>((i / g.spatial) % g.channels);
}

// One thread per position (n, s): out = init + sum over c of a (times b when given), the terms
// rounded to T as on the CPU and summed in double.
template <typename T>
__global__ void ChannelSums(NormalizeGeometry g, const T* a, const T* b, T init, T* out) {
  CREMA_CUDA_KERNEL_LOOP(index, g.count / g.channels) {
    const int64_t first = (index / g.spatial) * g.channels * g.spatial + index % g.spatial;
    double sum = init;
    for (int c = 0; c < g.channels; ++c) {
      const int64_t at = first + c * g.spatial;
      sum += b != nullptr ? a[at] * b[at] : a[at];
    }
    out[index] = static_cast<T>(sum);
  }
}

template <typename T>
__global__ void NormalizeForward(NormalizeGeometry g, const T* x, const T* norm, const T* scale,
                                 T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, g.count) {
    y[i] = x[i] / norm[NormIndex(g, i)] * scale[ScaleIndex(g, i)];
  }
}

// The terms of the scale gradient, dy * x / norm.
template <typename T>
__global__ void ScaleTerms(NormalizeGeometry g, const T* x, const T* dy, const T* norm, T* out) {
  CREMA_CUDA_KERNEL_LOOP(i, g.count) { out[i] = dy[i] * x[i] / norm[NormIndex(g, i)]; }
}

// The terms of sum(x * g) with g = dy * scale.
template <typename T>
__global__ void DotTerms(NormalizeGeometry g, const T* x, const T* dy, const T* scale, T* out) {
  CREMA_CUDA_KERNEL_LOOP(i, g.count) { out[i] = x[i] * dy[i] * scale[ScaleIndex(g, i)]; }
}

template <typename T>
__global__ void NormalizeBackward(NormalizeGeometry g, const T* x, const T* dy, const T* norm,
                                  const T* scale, const T* dot, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, g.count) {
    const int64_t k = NormIndex(g, i);
    const T n = norm[k];
    dx[i] = (scale[ScaleIndex(g, i)] * dy[i] - x[i] * dot[k] / (n * n)) / n;
  }
}

}  // namespace

void NormalizeLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const NormalizeGeometry g = MakeGeometry(*bottom[0], across_spatial_, channel_shared_);
  if (g.count == 0) return;
  const int num = bottom[0]->shape(0);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    T* norm = norm_.mutable_gpu_data<T>();
    if (across_spatial_) {
      // sqrt(sum x^2 + eps) per item.
      gpu::ReduceByAxis<T>(1, num, g.count / num, x, x, false, norm);
      gpu::AddScalar<T>(num, static_cast<T>(eps_), norm);
    } else {
      ChannelSums<T><<<gpu::Blocks(g.count / g.channels), gpu::kThreads, 0, gpu::Stream()>>>(
          g, x, x, static_cast<T>(eps_), norm);
      gpu::CheckLaunch("Normalize forward (norms)");
    }
    gpu::Sqrt<T>(norm_.count(), norm, norm);
    NormalizeForward<T><<<gpu::Blocks(g.count), gpu::kThreads, 0, gpu::Stream()>>>(
        g, x, norm, blobs_[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>());
    gpu::CheckLaunch("Normalize forward");
  });
}

void NormalizeLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const NormalizeGeometry g = MakeGeometry(*bottom[0], across_spatial_, channel_shared_);
  if (g.count == 0) return;
  const int num = bottom[0]->shape(0);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    const T* dy = top[0]->gpu_diff<T>();
    const T* norm = norm_.gpu_data<T>();
    const T* scale = blobs_[0]->gpu_data<T>();
    T* buffer = buffer_.mutable_gpu_data<T>();
    if (param_propagate_down(0)) {
      ScaleTerms<T>
          <<<gpu::Blocks(g.count), gpu::kThreads, 0, gpu::Stream()>>>(g, x, dy, norm, buffer);
      gpu::CheckLaunch("Normalize backward (scale)");
      T* scale_diff = blobs_[0]->mutable_gpu_diff<T>();
      if (channel_shared_)
        gpu::ReduceByAxis<T>(1, 1, g.count, buffer, nullptr, true, scale_diff);
      else
        gpu::ReduceByAxis<T>(num, g.channels, g.spatial, buffer, nullptr, true, scale_diff);
    }
    if (!propagate_down[0]) return;
    DotTerms<T><<<gpu::Blocks(g.count), gpu::kThreads, 0, gpu::Stream()>>>(g, x, dy, scale, buffer);
    gpu::CheckLaunch("Normalize backward (dot)");
    T* dot = dot_.mutable_gpu_data<T>();
    if (across_spatial_) {
      gpu::ReduceByAxis<T>(1, num, g.count / num, buffer, nullptr, false, dot);
    } else {
      ChannelSums<T><<<gpu::Blocks(g.count / g.channels), gpu::kThreads, 0, gpu::Stream()>>>(
          g, buffer, nullptr, T(0), dot);
      gpu::CheckLaunch("Normalize backward (channel sums)");
    }
    NormalizeBackward<T><<<gpu::Blocks(g.count), gpu::kThreads, 0, gpu::Stream()>>>(
        g, x, dy, norm, scale, dot, bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("Normalize backward");
  });
}

}  // namespace crema
