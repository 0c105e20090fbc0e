#pragma once
// Direct depthwise 2-D convolution on the CPU: the fast path of Convolution when group ==
// channels (num_output = multiplier * channels, multiplier >= 1), instead of im2col + GEMM.
// Output channel o reads input channel o / multiplier only:
//   top[n][o][y][x] = bias[o] + sum_{ky,kx} w[o][ky][kx] *
//                     bottom[n][o / multiplier][y * stride_h - pad_h + ky * dilation_h]
//                                              [x * stride_w - pad_w + kx * dilation_w]
// (taps outside the input read zero). Weights are Caffe's (num_output, 1, kernel_h, kernel_w).
// Work is split over whole planes (image x channel, or channel for the param diffs), each written
// by one thread in a fixed order, so results do not depend on the thread count.
#include <cstdint>

namespace crema {

struct DepthwiseShape {
  int64_t num = 0;  // images
  int channels = 0;
  int multiplier = 1;  // num_output / channels
  int height = 0, width = 0;
  int out_height = 0, out_width = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
};

// Whether a convolution with these parameters takes the depthwise path.
bool UseDepthwiseConv(int num_spatial_axes, int channels, int group, int num_output,
                      bool force_nd_im2col);
// A process-wide switch for tests that compare the fast path with im2col + GEMM (default on).
void SetDepthwiseConvEnabled(bool enabled);
bool DepthwiseConvEnabled();

// top = conv(bottom) (+ bias when not null); top is overwritten. With relu_slope not null, a
// fused ReLU (math/activation.hpp) with that negative slope is applied to each output plane.
template <typename T>
void DepthwiseConvForward(const DepthwiseShape& s, const T* bottom, const T* weight, const T* bias,
                          T* top, const T* relu_slope = nullptr);
// bottom_diff = conv^T(top_diff), overwritten.
template <typename T>
void DepthwiseConvBackwardData(const DepthwiseShape& s, const T* top_diff, const T* weight,
                               T* bottom_diff);
// weight_diff += correlation of top_diff with bottom; bias_diff (when not null) += sum of top_diff.
template <typename T>
void DepthwiseConvBackwardParams(const DepthwiseShape& s, const T* top_diff, const T* bottom,
                                 T* weight_diff, T* bias_diff);

#ifdef CREMA_WITH_CUDA
// The GPU twins (depthwise_conv_gpu.cu), on the device's stream. Whether a shape's blobs fit their
// 32-bit index math (else cuDNN runs it):
bool DepthwiseConvFitsGpu(const DepthwiseShape& s);
// top = conv(bottom) (+ bias when not null), then Caffe's ReLU when relu; overwritten.
template <typename T>
void DepthwiseConvForwardGpu(const DepthwiseShape& s, const T* bottom, const T* weight,
                             const T* bias, T* top, bool relu, T negative_slope);
// bottom_diff = conv^T(top_diff), overwritten.
template <typename T>
void DepthwiseConvBackwardDataGpu(const DepthwiseShape& s, const T* top_diff, const T* weight,
                                  T* bottom_diff);
// weight_diff += correlation of top_diff with bottom (summed in double in a fixed order).
template <typename T>
void DepthwiseConvBackwardWeightGpu(const DepthwiseShape& s, const T* top_diff, const T* bottom,
                                    T* weight_diff);
#endif

}  // namespace crema
