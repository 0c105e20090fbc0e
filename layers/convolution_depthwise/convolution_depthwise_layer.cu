#include "layers/convolution/depthwise_conv.hpp"
#include "layers/convolution_depthwise/convolution_depthwise_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// The kernels mirror depthwise_conv.cpp: each output (or input-diff) element sums its taps in the
// order ky, kx (and m before them for the input diff), as the CPU loops add them. Geometry is
// passed by value (DepthwiseShape is a plain struct).

// The coordinates of element `index` of an (images, channels, height, width) blob.
struct Element {
  int x, y, channel;
  int64_t image;
};
__device__ inline Element ElementAt(int64_t index, int channels, int height, int width) {
  const int64_t plane = index / (static_cast<int64_t>(height) * width);
  return {static_cast<int>(index % width), static_cast<int>((index / width) % height),
          static_cast<int>(plane % channels), plane / channels};
}

template <typename T>
__global__ void DepthwiseForward(int64_t n, DepthwiseShape s, const T* bottom, const T* weight,
                                 const T* bias, T* top) {
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int kernel_volume = s.kernel_h * s.kernel_w;
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const Element e = ElementAt(index, num_output, s.out_height, s.out_width);
    const int o = e.channel;
    const T* in = bottom + (e.image * s.channels + o / s.multiplier) * in_plane;
    const T* w = weight + static_cast<int64_t>(o) * kernel_volume;
    T sum = bias ? bias[o] : T(0);
    for (int ky = 0; ky < s.kernel_h; ++ky) {
      const int in_y = e.y * s.stride_h - s.pad_h + ky * s.dilation_h;
      if (in_y < 0 || in_y >= s.height) continue;
      for (int kx = 0; kx < s.kernel_w; ++kx) {
        const int in_x = e.x * s.stride_w - s.pad_w + kx * s.dilation_w;
        if (in_x < 0 || in_x >= s.width) continue;
        sum += w[ky * s.kernel_w + kx] * in[static_cast<int64_t>(in_y) * s.width + in_x];
      }
    }
    top[index] = sum;
  }
}

// The output index along one axis whose tap at `offset` (= pad - k * dilation, from the input
// position) reads input position `pos`, or -1.
__device__ inline int TapOutput(int pos, int offset, int stride, int out_size) {
  const int shifted = pos + offset;
  if (shifted < 0 || shifted % stride != 0) return -1;
  const int out = shifted / stride;
  return out < out_size ? out : -1;
}

// One thread per input element, gathering the taps of the `multiplier` output planes that read it.
template <typename T>
__global__ void DepthwiseBackwardData(int64_t n, DepthwiseShape s, const T* top_diff,
                                      const T* weight, T* bottom_diff) {
  const int num_output = s.channels * s.multiplier;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int kernel_volume = s.kernel_h * s.kernel_w;
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const Element e = ElementAt(index, s.channels, s.height, s.width);
    T sum = T(0);
    for (int m = 0; m < s.multiplier; ++m) {
      const int o = e.channel * s.multiplier + m;
      const T* out_diff = top_diff + (e.image * num_output + o) * out_plane;
      const T* w = weight + static_cast<int64_t>(o) * kernel_volume;
      for (int ky = 0; ky < s.kernel_h; ++ky) {
        const int y = TapOutput(e.y, s.pad_h - ky * s.dilation_h, s.stride_h, s.out_height);
        if (y < 0) continue;
        for (int kx = 0; kx < s.kernel_w; ++kx) {
          const int x = TapOutput(e.x, s.pad_w - kx * s.dilation_w, s.stride_w, s.out_width);
          if (x < 0) continue;
          sum += w[ky * s.kernel_w + kx] * out_diff[static_cast<int64_t>(y) * s.out_width + x];
        }
      }
    }
    bottom_diff[index] = sum;
  }
}

// One block per weight element (o, ky, kx): its threads stride over the (image, y, x) outputs,
// then a fixed tree sums their partial sums (in double), so the result does not depend on timing.
template <typename T>
__global__ void DepthwiseBackwardWeight(DepthwiseShape s, const T* top_diff, const T* bottom,
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

int GridFor(int64_t blocks) { return static_cast<int>(blocks < 65535 ? blocks : 65535); }

}  // namespace

bool DepthwiseConvolutionBase::DirectShape(DepthwiseShape* shape) const {
  if (num_spatial_axes_ != 2 || channels_ <= 0 || group_ != channels_ ||
      num_output_ % channels_ != 0)
    return false;
  *shape = DepthwiseShape{num_,
                          channels_,
                          num_output_ / channels_,
                          input_shape(0),
                          input_shape(1),
                          output_shape_[0],
                          output_shape_[1],
                          kernel_shape_[0],
                          kernel_shape_[1],
                          stride_[0],
                          stride_[1],
                          pad_[0],
                          pad_[1],
                          dilation_[0],
                          dilation_[1]};
  return true;
}

void DepthwiseConvolutionBase::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  DepthwiseShape s;
  if (!DirectShape(&s)) {
    ConvolutionLayer::ForwardGpu(bottom, top);
    return;
  }
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* weight = blobs_[0]->gpu_data<T>();
    const T* bias = bias_term_ ? blobs_[1]->gpu_data<T>() : nullptr;
    for (size_t i = 0; i < bottom.size(); ++i) {
      const int64_t n = top[i]->count();
      if (n == 0) continue;
      DepthwiseForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, s, bottom[i]->gpu_data<T>(), weight, bias, top[i]->mutable_gpu_data<T>());
      gpu::CheckLaunch("depthwise convolution forward");
    }
  });
}

void DepthwiseConvolutionBase::BackwardGpu(const BlobVec& top,
                                           const std::vector<bool>& propagate_down,
                                           const BlobVec& bottom) {
  DepthwiseShape s;
  if (!DirectShape(&s)) {
    ConvolutionLayer::BackwardGpu(top, propagate_down, bottom);
    return;
  }
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  const int64_t weights = static_cast<int64_t>(num_output_) * s.kernel_h * s.kernel_w;
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    for (size_t i = 0; i < top.size(); ++i) {
      if (top[i]->count() == 0) continue;
      const T* top_diff = top[i]->gpu_diff<T>();
      if (weight_down) {
        DepthwiseBackwardWeight<T><<<GridFor(weights), gpu::kThreads, 0, gpu::Stream()>>>(
            s, top_diff, bottom[i]->gpu_data<T>(), blobs_[0]->mutable_gpu_diff<T>());
        gpu::CheckLaunch("depthwise convolution weight backward");
      }
      if (bias_down)
        gpu::ReduceByAxis<T>(s.num, num_output_, static_cast<int64_t>(s.out_height) * s.out_width,
                             top_diff, nullptr, true, blobs_[1]->mutable_gpu_diff<T>());
      if (propagate_down[i]) {
        const int64_t n = bottom[i]->count();
        DepthwiseBackwardData<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
            n, s, top_diff, blobs_[0]->gpu_data<T>(), bottom[i]->mutable_gpu_diff<T>());
        gpu::CheckLaunch("depthwise convolution data backward");
      }
    }
  });
}

}  // namespace crema
