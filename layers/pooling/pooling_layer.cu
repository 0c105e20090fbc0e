#include <cfloat>

#include "layers/pooling/pooling_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

struct PoolingGeometry {
  int channels, height, width, pooled_height, pooled_width;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

// One thread per output; the first maximum in row-major window order wins, as on the CPU.
template <typename T>
__global__ void MaxPoolForward(int64_t n, const T* x, PoolingGeometry g, T* y, T* mask) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int pw = index % g.pooled_width;
    const int ph = (index / g.pooled_width) % g.pooled_height;
    const int64_t plane = index / g.pooled_width / g.pooled_height;
    const int hstart = max(ph * g.stride_h - g.pad_h, 0);
    const int wstart = max(pw * g.stride_w - g.pad_w, 0);
    const int hend = min(ph * g.stride_h - g.pad_h + g.kernel_h, g.height);
    const int wend = min(pw * g.stride_w - g.pad_w + g.kernel_w, g.width);
    const T* in = x + plane * g.height * g.width;
    T best = static_cast<T>(-FLT_MAX);
    int best_index = -1;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w)
        if (in[h * g.width + w] > best) {
          best = in[h * g.width + w];
          best_index = h * g.width + w;
        }
    y[index] = best;
    mask[index] = static_cast<T>(best_index);
  }
}

// The window size counts the padding (clipped to size + pad), as Caffe.
template <typename T>
__global__ void AvePoolForward(int64_t n, const T* x, PoolingGeometry g, T* y) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int pw = index % g.pooled_width;
    const int ph = (index / g.pooled_width) % g.pooled_height;
    const int64_t plane = index / g.pooled_width / g.pooled_height;
    int hstart = ph * g.stride_h - g.pad_h;
    int wstart = pw * g.stride_w - g.pad_w;
    int hend = min(hstart + g.kernel_h, g.height + g.pad_h);
    int wend = min(wstart + g.kernel_w, g.width + g.pad_w);
    const int pool_size = (hend - hstart) * (wend - wstart);
    hstart = max(hstart, 0);
    wstart = max(wstart, 0);
    hend = min(hend, g.height);
    wend = min(wend, g.width);
    const T* in = x + plane * g.height * g.width;
    T sum = 0;
    for (int h = hstart; h < hend; ++h)
      for (int w = wstart; w < wend; ++w) sum += in[h * g.width + w];
    y[index] = sum / pool_size;
  }
}

// The pooled outputs whose window holds bottom cell (h, w) along one axis: [start, end).
__device__ void CoveringRange(int pos, int pad, int kernel, int stride, int pooled, int* start,
                              int* end) {
  const int p = pos + pad;
  *start = p < kernel ? 0 : (p - kernel) / stride + 1;
  *end = min(p / stride + 1, pooled);
}

// Gather per bottom cell (no atomics, deterministic); sums in increasing output order.
template <typename T>
__global__ void MaxPoolBackward(int64_t n, const T* dy, const T* mask, PoolingGeometry g, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int w = index % g.width;
    const int h = (index / g.width) % g.height;
    const int64_t plane = index / g.width / g.height;
    int phstart, phend, pwstart, pwend;
    CoveringRange(h, g.pad_h, g.kernel_h, g.stride_h, g.pooled_height, &phstart, &phend);
    CoveringRange(w, g.pad_w, g.kernel_w, g.stride_w, g.pooled_width, &pwstart, &pwend);
    const int64_t offset = plane * g.pooled_height * g.pooled_width;
    const int cell = h * g.width + w;
    T grad = 0;
    for (int ph = phstart; ph < phend; ++ph)
      for (int pw = pwstart; pw < pwend; ++pw) {
        const int64_t k = offset + ph * g.pooled_width + pw;
        if (static_cast<int>(mask[k]) == cell) grad += dy[k];
      }
    dx[index] = grad;
  }
}

template <typename T>
__global__ void AvePoolBackward(int64_t n, const T* dy, PoolingGeometry g, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int w = index % g.width;
    const int h = (index / g.width) % g.height;
    const int64_t plane = index / g.width / g.height;
    int phstart, phend, pwstart, pwend;
    CoveringRange(h, g.pad_h, g.kernel_h, g.stride_h, g.pooled_height, &phstart, &phend);
    CoveringRange(w, g.pad_w, g.kernel_w, g.stride_w, g.pooled_width, &pwstart, &pwend);
    const T* in = dy + plane * g.pooled_height * g.pooled_width;
    T grad = 0;
    for (int ph = phstart; ph < phend; ++ph)
      for (int pw = pwstart; pw < pwend; ++pw) {
        const int hstart = ph * g.stride_h - g.pad_h;
        const int wstart = pw * g.stride_w - g.pad_w;
        const int hend = min(hstart + g.kernel_h, g.height + g.pad_h);
        const int wend = min(wstart + g.kernel_w, g.width + g.pad_w);
        grad += in[ph * g.pooled_width + pw] / ((hend - hstart) * (wend - wstart));
      }
    dx[index] = grad;
  }
}

}  // namespace

void PoolingLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (pool_ == PoolingParameter::STOCHASTIC) {
    // Sampling draws from the host generator so that CPU and GPU nets pick the same cells.
    ForwardCpu(bottom, top);
    return;
  }
  const PoolingGeometry g{channels_, height_,   width_,    pooled_height_, pooled_width_, kernel_h_,
                          kernel_w_, stride_h_, stride_w_, pad_h_,         pad_w_};
  const int64_t n = top[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    T* y = top[0]->mutable_gpu_data<T>();
    if (pool_ == PoolingParameter::MAX) {
      T* mask;
      if (top.size() > 1) {
        mask = top[1]->mutable_gpu_data<T>();
      } else {
        max_idx_gpu_.set_dtype(dtype());
        max_idx_gpu_.ReshapeLike(*top[0]);
        mask = max_idx_gpu_.mutable_gpu_data<T>();
      }
      MaxPoolForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, x, g, y, mask);
    } else {
      AvePoolForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, x, g, y);
    }
  });
  gpu::CheckLaunch("Pooling forward");
}

void PoolingLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  if (pool_ == PoolingParameter::STOCHASTIC) {
    BackwardCpu(top, propagate_down, bottom);
    return;
  }
  const PoolingGeometry g{channels_, height_,   width_,    pooled_height_, pooled_width_, kernel_h_,
                          kernel_w_, stride_h_, stride_w_, pad_h_,         pad_w_};
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* dy = top[0]->gpu_diff<T>();
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    if (pool_ == PoolingParameter::MAX) {
      const T* mask = top.size() > 1 ? top[1]->gpu_data<T>() : max_idx_gpu_.gpu_data<T>();
      MaxPoolBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, dy, mask, g, dx);
    } else {
      AvePoolBackward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(n, dy, g, dx);
    }
  });
  gpu::CheckLaunch("Pooling backward");
}

}  // namespace crema
