#include "math/im2col.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace crema::cpu {
namespace {

// One unsigned compare covers both 0 <= a and a < b (a negative a wraps to a huge value).
inline bool InRange(int a, int b) { return static_cast<unsigned>(a) < static_cast<unsigned>(b); }

inline int OutputSize(int size, int kernel, int pad, int stride, int dilation) {
  return (size + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

}  // namespace

namespace {

// The output positions [*lo, *hi) whose input index offset + o * stride lies in [0, size).
inline void ValidRange(int offset, int stride, int size, int output, int* lo, int* hi) {
  // First o with offset + o * stride >= 0, and first o with offset + o * stride >= size.
  int first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int last = size - offset <= 0 ? 0 : (size - offset + stride - 1) / stride;
  first = std::min(first, output);
  last = std::max(first, std::min(last, output));
  *lo = first;
  *hi = last;
}

// dst[0, n) = src[0, n) for short runs (an output row is often 8..32 elements): fixed-size
// copies inline, the last one overlapping the one before it instead of a tail of smaller ones
// (where std::copy would call memmove once per row). LeNet's conv2 (20 channels of 12 x 12, 5 x 5
// kernel, rows of 8) for 8 images: 103 us with copies of 8, 4, 2 and 1 in turn, 78 us so, 43 us
// with the whole-row path of Im2colChannel too.
template <typename T>
inline void CopyRow(const T* src, int n, T* dst) {
  if (n >= 8) {
    int i = 0;
    for (; i + 8 < n; i += 8) std::memcpy(dst + i, src + i, 8 * sizeof(T));
    std::memcpy(dst + n - 8, src + n - 8, 8 * sizeof(T));
  } else if (n >= 4) {
    std::memcpy(dst, src, 4 * sizeof(T));
    std::memcpy(dst + n - 4, src + n - 4, 4 * sizeof(T));
  } else if (n >= 2) {
    std::memcpy(dst, src, 2 * sizeof(T));
    std::memcpy(dst + n - 2, src + n - 2, 2 * sizeof(T));
  } else if (n == 1) {
    dst[0] = src[0];
  }
}

// dst[0, n) += src[0, n): the two never overlap, which the vectoriser is told (otherwise it
// checks on every row).
template <typename T>
inline void AddRow(const T* __restrict src, int n, T* __restrict dst) {
  for (int i = 0; i < n; ++i) dst[i] += src[i];
}

// One image channel to kernel_h * kernel_w column rows, row r at col + r * col_ld.
template <typename T>
void Im2colChannel(const T* im, int height, int width, int kernel_h, int kernel_w, int pad_h,
                   int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
                   int output_h, int output_w, T* col_row, int64_t col_ld) {
  for (int kh = 0; kh < kernel_h; ++kh) {
    for (int kw = 0; kw < kernel_w; ++kw, col_row += col_ld) {
      const int col_offset = kw * dilation_w - pad_w;
      int ow_lo, ow_hi;
      ValidRange(col_offset, stride_w, width, output_w, &ow_lo, &ow_hi);
      // Output rows [oh_lo, oh_hi) read image rows; the rows above and below read padding and
      // are contiguous in the column row, so each side is zeroed in one go.
      const int row_offset = kh * dilation_h - pad_h;
      int oh_lo, oh_hi;
      ValidRange(row_offset, stride_h, height, output_h, &oh_lo, &oh_hi);
      // (Tested first: with none to zero, as in the middle of the kernel, a call to memset for
      // nothing cost more than the row's copying.)
      if (oh_lo > 0) std::fill(col_row, col_row + static_cast<int64_t>(oh_lo) * output_w, T(0));
      if (oh_hi < output_h)
        std::fill(col_row + static_cast<int64_t>(oh_hi) * output_w,
                  col_row + static_cast<int64_t>(output_h) * output_w, T(0));
      T* col = col_row + static_cast<int64_t>(oh_lo) * output_w;
      int in_row = row_offset + oh_lo * stride_h;
      if (stride_w == 1 && ow_lo == 0 && ow_hi == output_w) {
        // Whole rows from the image: no padding columns.
        for (int oh = oh_lo; oh < oh_hi; ++oh, in_row += stride_h, col += output_w)
          CopyRow(im + static_cast<int64_t>(in_row) * width + col_offset, output_w, col);
        continue;
      }
      for (int oh = oh_lo; oh < oh_hi; ++oh, in_row += stride_h, col += output_w) {
        const T* im_row = im + static_cast<int64_t>(in_row) * width;
        for (int ow = 0; ow < ow_lo; ++ow) col[ow] = T(0);
        if (stride_w == 1) {
          CopyRow(im_row + col_offset + ow_lo, ow_hi - ow_lo, col + ow_lo);
        } else {
          for (int ow = ow_lo; ow < ow_hi; ++ow) col[ow] = im_row[col_offset + ow * stride_w];
        }
        for (int ow = ow_hi; ow < output_w; ++ow) col[ow] = T(0);
      }
    }
  }
}

// The adjoint of Im2colChannel: zeroes the image channel, then sums the column rows into it.
template <typename T>
void Col2imChannel(const T* col_row, int64_t col_ld, int height, int width, int kernel_h,
                   int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                   int dilation_w, int output_h, int output_w, T* im) {
  std::fill(im, im + static_cast<int64_t>(height) * width, T(0));
  for (int kh = 0; kh < kernel_h; ++kh) {
    for (int kw = 0; kw < kernel_w; ++kw, col_row += col_ld) {
      const int col_offset = kw * dilation_w - pad_w;
      int ow_lo, ow_hi;
      ValidRange(col_offset, stride_w, width, output_w, &ow_lo, &ow_hi);
      // Only output rows [oh_lo, oh_hi) come from image rows; the others read padding.
      const int row_offset = kh * dilation_h - pad_h;
      int oh_lo, oh_hi;
      ValidRange(row_offset, stride_h, height, output_h, &oh_lo, &oh_hi);
      const T* col = col_row + static_cast<int64_t>(oh_lo) * output_w;
      int in_row = row_offset + oh_lo * stride_h;
      if (stride_w == 1 && ow_lo == 0 && ow_hi == output_w) {
        // Whole rows into the image: no padding columns. (LeNet's conv2, 8 images: 85 -> 60 us a
        // col2im with this path and AddRow.)
        for (int oh = oh_lo; oh < oh_hi; ++oh, in_row += stride_h, col += output_w)
          AddRow(col, output_w, im + static_cast<int64_t>(in_row) * width + col_offset);
        continue;
      }
      for (int oh = oh_lo; oh < oh_hi; ++oh, in_row += stride_h, col += output_w) {
        T* im_row = im + static_cast<int64_t>(in_row) * width;
        if (stride_w == 1) {
          AddRow(col + ow_lo, ow_hi - ow_lo, im_row + col_offset + ow_lo);
        } else {
          for (int ow = ow_lo; ow < ow_hi; ++ow) im_row[col_offset + ow * stride_w] += col[ow];
        }
      }
    }
  }
}

}  // namespace

template <typename T>
void Im2col(const T* data_im, int channels, int height, int width, int kernel_h, int kernel_w,
            int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
            T* data_col) {
  const int output_h = OutputSize(height, kernel_h, pad_h, stride_h, dilation_h);
  const int output_w = OutputSize(width, kernel_w, pad_w, stride_w, dilation_w);
  const int64_t channel_size = static_cast<int64_t>(height) * width;
  const int64_t output_size = static_cast<int64_t>(output_h) * output_w;
  const int64_t kernel_size = static_cast<int64_t>(kernel_h) * kernel_w;
  // Channels write disjoint rows of the column buffer, so they can run in parallel.
#pragma omp parallel for if (channels * kernel_size * output_size > 65536)
  for (int c = 0; c < channels; ++c) {
    Im2colChannel(data_im + c * channel_size, height, width, kernel_h, kernel_w, pad_h, pad_w,
                  stride_h, stride_w, dilation_h, dilation_w, output_h, output_w,
                  data_col + c * kernel_size * output_size, output_size);
  }
}

template <typename T>
void Col2im(const T* data_col, int channels, int height, int width, int kernel_h, int kernel_w,
            int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
            T* data_im) {
  const int output_h = OutputSize(height, kernel_h, pad_h, stride_h, dilation_h);
  const int output_w = OutputSize(width, kernel_w, pad_w, stride_w, dilation_w);
  const int64_t channel_size = static_cast<int64_t>(height) * width;
  const int64_t output_size = static_cast<int64_t>(output_h) * output_w;
  const int64_t kernel_size = static_cast<int64_t>(kernel_h) * kernel_w;
  // Each channel accumulates only into its own image plane: parallel over channels is race-free.
#pragma omp parallel for if (channels * kernel_size * output_size > 65536)
  for (int c = 0; c < channels; ++c) {
    Col2imChannel(data_col + c * kernel_size * output_size, output_size, height, width, kernel_h,
                  kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, output_h,
                  output_w, data_im + c * channel_size);
  }
}

template <typename T>
void Im2colLd(const T* data_im, int channels, int height, int width, int kernel_h, int kernel_w,
              int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
              T* data_col, int64_t col_ld) {
  const int output_h = OutputSize(height, kernel_h, pad_h, stride_h, dilation_h);
  const int output_w = OutputSize(width, kernel_w, pad_w, stride_w, dilation_w);
  const int64_t channel_size = static_cast<int64_t>(height) * width;
  const int64_t kernel_size = static_cast<int64_t>(kernel_h) * kernel_w;
  for (int c = 0; c < channels; ++c) {
    Im2colChannel(data_im + c * channel_size, height, width, kernel_h, kernel_w, pad_h, pad_w,
                  stride_h, stride_w, dilation_h, dilation_w, output_h, output_w,
                  data_col + c * kernel_size * col_ld, col_ld);
  }
}

template <typename T>
void Col2imLd(const T* data_col, int64_t col_ld, int channels, int height, int width, int kernel_h,
              int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
              int dilation_w, T* data_im) {
  const int output_h = OutputSize(height, kernel_h, pad_h, stride_h, dilation_h);
  const int output_w = OutputSize(width, kernel_w, pad_w, stride_w, dilation_w);
  const int64_t channel_size = static_cast<int64_t>(height) * width;
  const int64_t kernel_size = static_cast<int64_t>(kernel_h) * kernel_w;
  for (int c = 0; c < channels; ++c) {
    Col2imChannel(data_col + c * kernel_size * col_ld, col_ld, height, width, kernel_h, kernel_w,
                  pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, output_h, output_w,
                  data_im + c * channel_size);
  }
}

namespace {

// Shared walk for the N-D transforms: for every column-buffer element, find the image element it
// mirrors (or learn that it lies in the padding) and copy (im2col) or accumulate (col2im).
template <typename T, bool kIm2col>
void Im2colNdCore(const T* input, int num_spatial_axes, const int* im_shape, const int* col_shape,
                  const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                  T* output, int64_t col_ld) {
  if (!kIm2col) {
    int64_t im_size = im_shape[0];
    for (int i = 0; i < num_spatial_axes; ++i) im_size *= im_shape[i + 1];
    std::fill(output, output + im_size, T(0));
  }
  int64_t kernel_volume = 1;
  int64_t col_volume = 1;
  for (int i = 0; i < num_spatial_axes; ++i) {
    kernel_volume *= kernel_shape[i];
    col_volume *= col_shape[i + 1];
  }
  if (col_ld < 0) col_ld = col_volume;
  const int channels_col = col_shape[0];
  std::vector<int> d_offset(num_spatial_axes);
  std::vector<int> d_iter(num_spatial_axes);
  for (int c_col = 0; c_col < channels_col; ++c_col) {
    // Position inside the kernel that this column-buffer row stands for, last axis fastest.
    int64_t offset = c_col;
    for (int d = num_spatial_axes - 1; d >= 0; --d) {
      d_offset[d] = static_cast<int>(offset % kernel_shape[d]);
      offset /= kernel_shape[d];
    }
    const int64_t c_im = c_col / kernel_volume;
    std::fill(d_iter.begin(), d_iter.end(), 0);
    for (int64_t index_col_spatial = 0; index_col_spatial < col_volume; ++index_col_spatial) {
      const int64_t index_col = c_col * col_ld + index_col_spatial;
      int64_t index_im = c_im;
      bool in_image = true;
      for (int d = 0; d < num_spatial_axes; ++d) {
        const int d_im = d_iter[d] * stride[d] - pad[d] + d_offset[d] * dilation[d];
        in_image = in_image && InRange(d_im, im_shape[d + 1]);
        index_im = index_im * im_shape[d + 1] + d_im;
      }
      if (kIm2col) {
        output[index_col] = in_image ? input[index_im] : T(0);
      } else if (in_image) {
        output[index_im] += input[index_col];
      }
      // Advance the output position like an odometer, last axis fastest.
      for (int d = num_spatial_axes - 1; d >= 0; --d) {
        if (++d_iter[d] < col_shape[d + 1]) break;
        d_iter[d] = 0;
      }
    }
  }
}

}  // namespace

template <typename T>
void Im2colNd(const T* data_im, int num_spatial_axes, const int* im_shape, const int* col_shape,
              const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
              T* data_col) {
  Im2colNdCore<T, true>(data_im, num_spatial_axes, im_shape, col_shape, kernel_shape, pad, stride,
                        dilation, data_col, -1);
}

template <typename T>
void Col2imNd(const T* data_col, int num_spatial_axes, const int* im_shape, const int* col_shape,
              const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
              T* data_im) {
  Im2colNdCore<T, false>(data_col, num_spatial_axes, im_shape, col_shape, kernel_shape, pad, stride,
                         dilation, data_im, -1);
}

template <typename T>
void Im2colNdLd(const T* data_im, int num_spatial_axes, const int* im_shape, const int* col_shape,
                const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                T* data_col, int64_t col_ld) {
  Im2colNdCore<T, true>(data_im, num_spatial_axes, im_shape, col_shape, kernel_shape, pad, stride,
                        dilation, data_col, col_ld);
}

template <typename T>
void Col2imNdLd(const T* data_col, int64_t col_ld, int num_spatial_axes, const int* im_shape,
                const int* col_shape, const int* kernel_shape, const int* pad, const int* stride,
                const int* dilation, T* data_im) {
  Im2colNdCore<T, false>(data_col, num_spatial_axes, im_shape, col_shape, kernel_shape, pad, stride,
                         dilation, data_im, col_ld);
}

#define CREMA_INSTANTIATE_IM2COL(T)                                                              \
  template void Im2col<T>(const T*, int, int, int, int, int, int, int, int, int, int, int, T*);  \
  template void Col2im<T>(const T*, int, int, int, int, int, int, int, int, int, int, int, T*);  \
  template void Im2colNd<T>(const T*, int, const int*, const int*, const int*, const int*,       \
                            const int*, const int*, T*);                                         \
  template void Col2imNd<T>(const T*, int, const int*, const int*, const int*, const int*,       \
                            const int*, const int*, T*);                                         \
  template void Im2colLd<T>(const T*, int, int, int, int, int, int, int, int, int, int, int, T*, \
                            int64_t);                                                            \
  template void Col2imLd<T>(const T*, int64_t, int, int, int, int, int, int, int, int, int, int, \
                            int, T*);                                                            \
  template void Im2colNdLd<T>(const T*, int, const int*, const int*, const int*, const int*,     \
                              const int*, const int*, T*, int64_t);                              \
  template void Col2imNdLd<T>(const T*, int64_t, int, const int*, const int*, const int*,        \
                              const int*, const int*, const int*, T*);

CREMA_INSTANTIATE_IM2COL(float)
CREMA_INSTANTIATE_IM2COL(double)
#undef CREMA_INSTANTIATE_IM2COL

}  // namespace crema::cpu
