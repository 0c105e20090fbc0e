#include "layers/convolution/depthwise_conv.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

#include "math/activation.hpp"

namespace crema {
namespace {

std::atomic<bool> depthwise_enabled{true};

// The outputs [begin, end) along one axis whose tap at input offset `offset` (= k * dilation -
// pad) lands inside [0, size): out * stride + offset in [0, size).
struct TapRange {
  int offset = 0;
  int begin = 0;
  int end = 0;
};

std::vector<TapRange> TapRanges(int kernel, int dilation, int pad, int stride, int size,
                                int out_size) {
  std::vector<TapRange> ranges(kernel);
  for (int k = 0; k < kernel; ++k) {
    TapRange& r = ranges[k];
    r.offset = k * dilation - pad;
    r.begin = r.offset >= 0 ? 0 : (-r.offset + stride - 1) / stride;
    const int last_input = size - 1 - r.offset;
    r.end = last_input < 0 ? 0 : std::min(out_size, last_input / stride + 1);
    r.begin = std::min(r.begin, r.end);
  }
  return ranges;
}

struct Taps {
  std::vector<TapRange> rows, cols;
  explicit Taps(const DepthwiseShape& s)
      : rows(TapRanges(s.kernel_h, s.dilation_h, s.pad_h, s.stride_h, s.height, s.out_height)),
        cols(TapRanges(s.kernel_w, s.dilation_w, s.pad_w, s.stride_w, s.width, s.out_width)) {}
};

constexpr int64_t kParallelWork = 65536;

}  // namespace

bool UseDepthwiseConv(int num_spatial_axes, int channels, int group, int num_output,
                      bool force_nd_im2col) {
  return DepthwiseConvEnabled() && num_spatial_axes == 2 && !force_nd_im2col && channels > 0 &&
         group == channels && num_output % channels == 0;
}

void SetDepthwiseConvEnabled(bool enabled) { depthwise_enabled.store(enabled); }
bool DepthwiseConvEnabled() { return depthwise_enabled.load(); }

template <typename T>
void DepthwiseConvForward(const DepthwiseShape& s, const T* bottom, const T* weight, const T* bias,
                          T* top, const T* relu_slope) {
  const Taps taps(s);
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int64_t kernel_volume = static_cast<int64_t>(s.kernel_h) * s.kernel_w;
  const int64_t planes = s.num * num_output;
#pragma omp parallel for if (planes * out_plane * kernel_volume > kParallelWork)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t n = p / num_output;
    const int o = static_cast<int>(p % num_output);
    const T* in = bottom + (n * s.channels + o / s.multiplier) * in_plane;
    const T* w = weight + o * kernel_volume;
    T* out = top + p * out_plane;
    std::fill(out, out + out_plane, bias ? bias[o] : T(0));
    for (int ky = 0; ky < s.kernel_h; ++ky) {
      const TapRange& row = taps.rows[ky];
      for (int y = row.begin; y < row.end; ++y) {
        const T* in_row = in + static_cast<int64_t>(y * s.stride_h + row.offset) * s.width;
        T* out_row = out + static_cast<int64_t>(y) * s.out_width;
        for (int kx = 0; kx < s.kernel_w; ++kx) {
          const TapRange& col = taps.cols[kx];
          const T value = w[ky * s.kernel_w + kx];
          if (s.stride_w == 1) {
            const T* src = in_row + col.offset;
            for (int x = col.begin; x < col.end; ++x) out_row[x] += value * src[x];
          } else {
            for (int x = col.begin; x < col.end; ++x)
              out_row[x] += value * in_row[x * s.stride_w + col.offset];
          }
        }
      }
    }
    if (relu_slope != nullptr)
      for (int64_t i = 0; i < out_plane; ++i) out[i] = ReLUValue(out[i], *relu_slope);
  }
}

template <typename T>
void DepthwiseConvBackwardData(const DepthwiseShape& s, const T* top_diff, const T* weight,
                               T* bottom_diff) {
  const Taps taps(s);
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int64_t kernel_volume = static_cast<int64_t>(s.kernel_h) * s.kernel_w;
  const int64_t planes = s.num * s.channels;
  // One thread per input plane, gathering the `multiplier` output planes that read it.
#pragma omp parallel for if (planes * s.multiplier * out_plane * kernel_volume > kParallelWork)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t n = p / s.channels;
    const int c = static_cast<int>(p % s.channels);
    T* in_diff = bottom_diff + p * in_plane;
    std::fill(in_diff, in_diff + in_plane, T(0));
    for (int m = 0; m < s.multiplier; ++m) {
      const int o = c * s.multiplier + m;
      const T* out_diff = top_diff + (n * s.channels * s.multiplier + o) * out_plane;
      const T* w = weight + o * kernel_volume;
      for (int ky = 0; ky < s.kernel_h; ++ky) {
        const TapRange& row = taps.rows[ky];
        for (int y = row.begin; y < row.end; ++y) {
          T* in_row = in_diff + static_cast<int64_t>(y * s.stride_h + row.offset) * s.width;
          const T* out_row = out_diff + static_cast<int64_t>(y) * s.out_width;
          for (int kx = 0; kx < s.kernel_w; ++kx) {
            const TapRange& col = taps.cols[kx];
            const T value = w[ky * s.kernel_w + kx];
            if (s.stride_w == 1) {
              T* dst = in_row + col.offset;
              for (int x = col.begin; x < col.end; ++x) dst[x] += value * out_row[x];
            } else {
              for (int x = col.begin; x < col.end; ++x)
                in_row[x * s.stride_w + col.offset] += value * out_row[x];
            }
          }
        }
      }
    }
  }
}

template <typename T>
void DepthwiseConvBackwardParams(const DepthwiseShape& s, const T* top_diff, const T* bottom,
                                 T* weight_diff, T* bias_diff) {
  const Taps taps(s);
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int64_t kernel_volume = static_cast<int64_t>(s.kernel_h) * s.kernel_w;
  // One thread per output channel, summing over the images in order.
#pragma omp parallel for if (s.num * num_output * out_plane * kernel_volume > kParallelWork)
  for (int o = 0; o < num_output; ++o) {
    std::vector<T> sums(kernel_volume, T(0));
    T bias_sum = T(0);
    for (int64_t n = 0; n < s.num; ++n) {
      const T* in = bottom + (n * s.channels + o / s.multiplier) * in_plane;
      const T* out_diff = top_diff + (n * num_output + o) * out_plane;
      if (weight_diff) {
        for (int ky = 0; ky < s.kernel_h; ++ky) {
          const TapRange& row = taps.rows[ky];
          for (int y = row.begin; y < row.end; ++y) {
            const T* in_row = in + static_cast<int64_t>(y * s.stride_h + row.offset) * s.width;
            const T* out_row = out_diff + static_cast<int64_t>(y) * s.out_width;
            for (int kx = 0; kx < s.kernel_w; ++kx) {
              const TapRange& col = taps.cols[kx];
              T sum = T(0);
              for (int x = col.begin; x < col.end; ++x)
                sum += out_row[x] * in_row[x * s.stride_w + col.offset];
              sums[ky * s.kernel_w + kx] += sum;
            }
          }
        }
      }
      if (bias_diff)
        for (int64_t i = 0; i < out_plane; ++i) bias_sum += out_diff[i];
    }
    if (weight_diff)
      for (int64_t k = 0; k < kernel_volume; ++k) weight_diff[o * kernel_volume + k] += sums[k];
    if (bias_diff) bias_diff[o] += bias_sum;
  }
}

#define CREMA_INSTANTIATE_DEPTHWISE(T)                                                           \
  template void DepthwiseConvForward<T>(const DepthwiseShape&, const T*, const T*, const T*, T*, \
                                        const T*);                                               \
  template void DepthwiseConvBackwardData<T>(const DepthwiseShape&, const T*, const T*, T*);     \
  template void DepthwiseConvBackwardParams<T>(const DepthwiseShape&, const T*, const T*, T*, T*);
CREMA_INSTANTIATE_DEPTHWISE(float)
CREMA_INSTANTIATE_DEPTHWISE(double)
#undef CREMA_INSTANTIATE_DEPTHWISE

}  // namespace crema
