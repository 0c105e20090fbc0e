#include "layers/convolution/depthwise_conv.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

#include "math/activation.hpp"
#include "math/cpu_isa.hpp"

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

// ---- 3x3 planes, stride 1 or 2, dilation 1 (MobileNet's and most depthwise layers) ----
// Each plane is first copied into a zero-padded one holding exactly the rows and columns its
// outputs read (P, (out - 1) * stride + 3 of each), so that one flat loop over the outputs has
// no bounds to test and every tap is a unit stride. Stride 1: P as it is, with row length
// cols = out_width + 2; output (y, x) is at y * cols + x (the two last of each row unused).
// Stride 2: P split by row and column parity into four planes with the same row length
// half = out_width + 1, EE[r][c] = P[2r][2c], EO = P[2r][2c + 1], OE = P[2r + 1][2c],
// OO = P[2r + 1][2c + 1]; output (y, x), at y * half + x, reads EE, EO, EE+1 (row 2y), OE, OO,
// OE+1 (row 2y + 1) and the same three of EE and EO one row down (row 2y + 2). Each output is
// bias + its nine taps summed in the generic loop's order (row by row, left to right). The loops
// are compiled for the baseline, AVX2 + FMA and AVX-512 (RunForCpuIsa).

// The padded plane of output rows [0, out_height) and columns [0, out_width).
struct Padded3x3 {
  int stride = 1;
  int rows = 0, cols = 0;  // of P: (out - 1) * stride + 3
  // Stride 2: the row length of the parity planes and where each starts in the scratch.
  int half = 0;
  int64_t ee = 0, eo = 0, oe = 0, oo = 0;
  int64_t size = 0;  // values of scratch
};

bool Uses3x3Planes(const DepthwiseShape& s) {
  return s.kernel_h == 3 && s.kernel_w == 3 && s.dilation_h == 1 && s.dilation_w == 1 &&
         s.stride_h == s.stride_w && (s.stride_w == 1 || s.stride_w == 2);
}

Padded3x3 PaddedGeometry(const DepthwiseShape& s) {
  Padded3x3 g;
  g.stride = s.stride_w;
  g.rows = (s.out_height - 1) * g.stride + 3;
  g.cols = (s.out_width - 1) * g.stride + 3;
  if (g.stride == 1) {
    g.size = static_cast<int64_t>(g.rows) * g.cols;
    return g;
  }
  // rows = 2 out_height + 1: out_height + 1 even rows, out_height odd ones.
  g.half = s.out_width + 1;
  const int64_t even_plane = static_cast<int64_t>(s.out_height + 1) * g.half;
  const int64_t odd_plane = static_cast<int64_t>(s.out_height) * g.half;
  g.ee = 0;
  g.eo = even_plane;
  g.oe = 2 * even_plane;
  g.oo = 2 * even_plane + odd_plane;
  g.size = 2 * even_plane + 2 * odd_plane;
  return g;
}

template <typename T>
struct Plane3x3Args {
  const DepthwiseShape* shape;
  const Padded3x3* geometry;
  const T* in;  // the input plane
  T* padded;    // geometry->size values, zero where no input value lands
  T* acc;       // out_height rows of the flat loop's row length
  const T* w;   // 9 taps
  T bias;
  const T* relu_slope;  // null: no fused ReLU
  T* out;
};

// Copies the input plane into the padded one(s); the border stays zero from before.
template <typename T>
__attribute__((always_inline)) inline void PadPlane(const Plane3x3Args<T>& a) {
  const DepthwiseShape& s = *a.shape;
  const Padded3x3& g = *a.geometry;
  const int copied = std::max(0, std::min(s.width, g.cols - s.pad_w));
  for (int y = 0; y < s.height && y + s.pad_h < g.rows; ++y) {
    const T* __restrict src = a.in + static_cast<int64_t>(y) * s.width;
    const int r = y + s.pad_h;
    if (g.stride == 1) {
      T* __restrict row = a.padded + static_cast<int64_t>(r) * g.cols;
      for (int x = 0; x < copied; ++x) row[s.pad_w + x] = src[x];
      continue;
    }
    // Padded column c = x + pad_w: even c at [c / 2] of the even-column plane, odd c at [c / 2]
    // of the odd-column one, in row r / 2 of the planes of r's parity.
    const int64_t row = static_cast<int64_t>(r / 2) * g.half;
    T* __restrict even = a.padded + (r % 2 == 0 ? g.ee : g.oe) + row;
    T* __restrict odd = a.padded + (r % 2 == 0 ? g.eo : g.oo) + row;
    const int even_end = (copied + s.pad_w + 1) / 2;
    const int odd_end = (copied + s.pad_w) / 2;
    for (int j = (s.pad_w + 1) / 2; j < even_end; ++j) even[j] = src[2 * j - s.pad_w];
    for (int j = s.pad_w / 2; j < odd_end; ++j) odd[j] = src[2 * j + 1 - s.pad_w];
  }
}

// out = the first out_width values of each row of acc (row length `stride`), through the fused
// ReLU when there is one.
template <typename T>
__attribute__((always_inline)) inline void Compact(const Plane3x3Args<T>& a, int64_t stride) {
  const DepthwiseShape& s = *a.shape;
  const int out_width = s.out_width;
  for (int y = 0; y < s.out_height; ++y) {
    const T* __restrict from = a.acc + y * stride;
    T* __restrict o = a.out + static_cast<int64_t>(y) * out_width;
    if (a.relu_slope == nullptr) {
      for (int x = 0; x < out_width; ++x) o[x] = from[x];
    } else {
      const T slope = *a.relu_slope;
      for (int x = 0; x < out_width; ++x) o[x] = ReLUValue(from[x], slope);
    }
  }
}

template <typename T, int kStride>
__attribute__((always_inline)) inline void Plane3x3Body(const Plane3x3Args<T>& a) {
  const DepthwiseShape& s = *a.shape;
  const Padded3x3& g = *a.geometry;
  PadPlane(a);
  const T w0 = a.w[0], w1 = a.w[1], w2 = a.w[2], w3 = a.w[3], w4 = a.w[4], w5 = a.w[5], w6 = a.w[6],
          w7 = a.w[7], w8 = a.w[8], bias = a.bias;
  const int64_t cols = g.cols;
  if (kStride == 1) {
    // One loop over the plane as a flat array with the padded row length: output (y, x) is
    // acc[y * cols + x]; the two last values of each row (x >= out_width) are never read. The
    // last row stops before them, inside the padded plane.
    const T* __restrict r0 = a.padded;
    const T* __restrict r1 = r0 + cols;
    const T* __restrict r2 = r1 + cols;
    T* __restrict acc = a.acc;
    const int64_t n = s.out_height * cols - 2;
    for (int64_t i = 0; i < n; ++i)
      acc[i] = bias + w0 * r0[i] + w1 * r0[i + 1] + w2 * r0[i + 2] + w3 * r1[i] + w4 * r1[i + 1] +
               w5 * r1[i + 2] + w6 * r2[i] + w7 * r2[i + 1] + w8 * r2[i + 2];
    return Compact(a, cols);
  }
  // Stride 2: the flat loop over the parity planes (x = out_width of each row unused; the last
  // one is not computed, which keeps the reads inside the planes).
  const int64_t half = g.half;
  const T* __restrict ee = a.padded + g.ee;
  const T* __restrict eo = a.padded + g.eo;
  const T* __restrict oe = a.padded + g.oe;
  const T* __restrict oo = a.padded + g.oo;
  T* __restrict acc = a.acc;
  const int64_t n = s.out_height * half - 1;
  for (int64_t i = 0; i < n; ++i)
    acc[i] = bias + w0 * ee[i] + w1 * eo[i] + w2 * ee[i + 1] + w3 * oe[i] + w4 * oo[i] +
             w5 * oe[i + 1] + w6 * ee[i + half] + w7 * eo[i + half] + w8 * ee[i + half + 1];
  Compact(a, half);
}

template <typename T>
void DepthwiseForward3x3(const DepthwiseShape& s, const T* bottom, const T* weight, const T* bias,
                         T* top, const T* relu_slope) {
  const Padded3x3 g = PaddedGeometry(s);
  const int num_output = s.channels * s.multiplier;
  const int64_t in_plane = static_cast<int64_t>(s.height) * s.width;
  const int64_t out_plane = static_cast<int64_t>(s.out_height) * s.out_width;
  const int64_t planes = s.num * num_output;
#pragma omp parallel if (planes * out_plane * 9 > kParallelWork)
  {
    // Zero once: each plane writes the same interior.
    std::vector<T> padded(static_cast<size_t>(g.size));
    std::vector<T> acc(static_cast<size_t>(s.out_height) * (g.stride == 1 ? g.cols : g.half));
#pragma omp for
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t n = p / num_output;
      const int o = static_cast<int>(p % num_output);
      const Plane3x3Args<T> a{&s,
                              &g,
                              bottom + (n * s.channels + o / s.multiplier) * in_plane,
                              padded.data(),
                              acc.data(),
                              weight + o * 9,
                              bias ? bias[o] : T(0),
                              relu_slope,
                              top + p * out_plane};
      if (g.stride == 1)
        RunForCpuIsa([&]() CREMA_ISA_INLINE { Plane3x3Body<T, 1>(a); });
      else
        RunForCpuIsa([&]() CREMA_ISA_INLINE { Plane3x3Body<T, 2>(a); });
    }
  }
}
// ---- end 3x3 planes ----

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
  if (Uses3x3Planes(s)) return DepthwiseForward3x3(s, bottom, weight, bias, top, relu_slope);
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
