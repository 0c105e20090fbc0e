#pragma once
// im2col / col2im for 2-D and N-D convolution, Caffe's layout: the column buffer is
// (channels * kernel volume) x (output spatial volume), row-major. Output size per axis is
// (size + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1; padding reads as zero.
// Col2im/Col2imNd are the adjoints of Im2col/Im2colNd: as Caffe, they zero data_im first and then
// sum every column element into the image element it was copied from.
#include <cstdint>

namespace crema::cpu {

template <typename T>
void Im2col(const T* data_im, int channels, int height, int width, int kernel_h, int kernel_w,
            int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
            T* data_col);
template <typename T>
void Col2im(const T* data_col, int channels, int height, int width, int kernel_h, int kernel_w,
            int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
            T* data_im);

// N-D: im_shape = (channels, d1..dN), col_shape = (channels * prod(kernel), o1..oN).
template <typename T>
void Im2colNd(const T* data_im, int num_spatial_axes, const int* im_shape, const int* col_shape,
              const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
              T* data_col);
template <typename T>
void Col2imNd(const T* data_col, int num_spatial_axes, const int* im_shape, const int* col_shape,
              const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
              T* data_im);

// Strided, single-threaded variants for batching several images into one column buffer: row r of
// the column buffer starts at data_col + r * col_ld (col_ld >= output spatial volume), so images
// can sit side by side, e.g. (channels * kernel volume) x (images * output volume). Callers
// parallelise over images or channels themselves.
template <typename T>
void Im2colLd(const T* data_im, int channels, int height, int width, int kernel_h, int kernel_w,
              int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w,
              T* data_col, int64_t col_ld);
template <typename T>
void Col2imLd(const T* data_col, int64_t col_ld, int channels, int height, int width, int kernel_h,
              int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
              int dilation_w, T* data_im);
template <typename T>
void Im2colNdLd(const T* data_im, int num_spatial_axes, const int* im_shape, const int* col_shape,
                const int* kernel_shape, const int* pad, const int* stride, const int* dilation,
                T* data_col, int64_t col_ld);
template <typename T>
void Col2imNdLd(const T* data_col, int64_t col_ld, int num_spatial_axes, const int* im_shape,
                const int* col_shape, const int* kernel_shape, const int* pad, const int* stride,
                const int* dilation, T* data_im);

}  // namespace crema::cpu
