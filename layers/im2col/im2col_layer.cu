#include "crema/blob.hpp"
#include "layers/im2col/im2col_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// N-D im2col geometry of one image (C, in...) -> (C * kernel_volume, out...), all spatial axes
// row-major; kernel offsets run row-major too (the last axis fastest), as the CPU's column rows.
// The 2-D and N-D CPU paths produce the same columns, so one N-D kernel serves both.
struct ColGeometry {
  static constexpr int kMaxAxes = Blob::kMaxAxes;
  int axes = 0;
  int64_t channels = 0, kernel_volume = 1, in_spatial = 1, out_spatial = 1;
  int in[kMaxAxes] = {}, out[kMaxAxes] = {}, kernel[kMaxAxes] = {};
  int stride[kMaxAxes] = {}, pad[kMaxAxes] = {}, dilation[kMaxAxes] = {};
};

// One thread per column element: the image element it copies, or zero in the padding.
template <typename T>
__global__ void Im2colKernel(int64_t n, ColGeometry g, const T* image, T* col) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    int64_t out_index = i % g.out_spatial;
    const int64_t row = i / g.out_spatial;  // (image, channel, kernel offset)
    int64_t offset = row % g.kernel_volume;
    const int64_t plane = row / g.kernel_volume;  // image * channels + channel
    int64_t in_index = 0, in_step = 1;
    bool inside = true;
    for (int d = g.axes - 1; d >= 0; --d) {
      const int pos = static_cast<int>(out_index % g.out[d]) * g.stride[d] - g.pad[d] +
                      static_cast<int>(offset % g.kernel[d]) * g.dilation[d];
      out_index /= g.out[d];
      offset /= g.kernel[d];
      inside = inside && pos >= 0 && pos < g.in[d];
      in_index += pos * in_step;
      in_step *= g.in[d];
    }
    col[i] = inside ? image[plane * g.in_spatial + in_index] : T(0);
  }
}

// One thread per image element: the sum of the column elements that copied it, in kernel-offset
// order as the CPU's col2im adds them (it zeroes the image first).
template <typename T>
__global__ void Col2imKernel(int64_t n, ColGeometry g, const T* col, T* image) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const int64_t plane = i / g.in_spatial;
    const int64_t in_index = i % g.in_spatial;
    const T* plane_col = col + plane * g.kernel_volume * g.out_spatial;
    T sum = T(0);
    for (int64_t k = 0; k < g.kernel_volume; ++k) {
      int64_t rest_in = in_index, rest_k = k, out_index = 0, out_step = 1;
      bool hit = true;
      for (int d = g.axes - 1; d >= 0 && hit; --d) {
        const int shifted = static_cast<int>(rest_in % g.in[d]) + g.pad[d] -
                            static_cast<int>(rest_k % g.kernel[d]) * g.dilation[d];
        rest_in /= g.in[d];
        rest_k /= g.kernel[d];
        hit = shifted >= 0 && shifted % g.stride[d] == 0 && shifted / g.stride[d] < g.out[d];
        out_index += (shifted / g.stride[d]) * out_step;
        out_step *= g.out[d];
      }
      if (hit) sum += plane_col[k * g.out_spatial + out_index];
    }
    image[i] = sum;
  }
}

ColGeometry Im2colGeometry(const Blob& bottom, const Blob& top, int channel_axis,
                           const std::vector<int>& kernel, const std::vector<int>& stride,
                           const std::vector<int>& pad, const std::vector<int>& dilation) {
  ColGeometry g;
  g.axes = static_cast<int>(kernel.size());
  g.channels = bottom.shape(channel_axis);
  for (int d = 0; d < g.axes; ++d) {
    g.in[d] = bottom.shape(channel_axis + 1 + d);
    g.out[d] = top.shape(channel_axis + 1 + d);
    g.kernel[d] = kernel[d];
    g.stride[d] = stride[d];
    g.pad[d] = pad[d];
    g.dilation[d] = dilation[d];
    g.kernel_volume *= kernel[d];
    g.in_spatial *= g.in[d];
    g.out_spatial *= g.out[d];
  }
  return g;
}

}  // namespace

void Im2colLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = top[0]->count();
  if (n == 0) return;
  const ColGeometry g =
      Im2colGeometry(*bottom[0], *top[0], channel_axis_, kernel_shape_, stride_, pad_, dilation_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    Im2colKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, g, bottom[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("Im2col forward");
}

void Im2colLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  const int64_t n = bottom[0]->count();
  if (!propagate_down[0] || n == 0) return;
  const ColGeometry g =
      Im2colGeometry(*bottom[0], *top[0], channel_axis_, kernel_shape_, stride_, pad_, dilation_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    Col2imKernel<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, g, top[0]->gpu_diff<T>(), bottom[0]->mutable_gpu_diff<T>());
  });
  gpu::CheckLaunch("Im2col backward");
}

}  // namespace crema
