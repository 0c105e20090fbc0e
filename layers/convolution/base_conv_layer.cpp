#include "layers/convolution/base_conv_layer.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>

#include "core/workspace.hpp"
#include "math/activation.hpp"
#include "math/few_rows_gemm.hpp"
#include "math/im2col.hpp"
#include "math/math.hpp"

namespace crema {

void BaseConvolutionLayer::ReadSpatialParam(const char* name, int num_values,
                                            const uint32_t* values, bool has_h, bool has_w,
                                            uint32_t value_h, uint32_t value_w, int default_value,
                                            bool required, std::vector<int>* out) {
  const std::string field = StrCat("convolution_param.", name);
  // The 2-D alternatives of kernel_size are kernel_h/kernel_w.
  const std::string hw = std::string(name) == "kernel_size" ? "kernel" : name;
  out->assign(num_spatial_axes_, default_value);
  if (has_h || has_w) {
    // As Caffe: both _h and _w are read; a missing one reads as its proto default (0 for kernel
    // and stride, caught by the > 0 checks).
    CREMA_CHECK_PARAM(num_spatial_axes_ == 2, StrCat("convolution_param.", hw, "_h"), "and ", hw,
                      "_w can only be used for 2-D convolution, the bottom has ", num_spatial_axes_,
                      " spatial axes");
    CREMA_CHECK_PARAM(num_values == 0, field, "is given both as ", name, " and as ", hw, "_h/", hw,
                      "_w; use one or the other");
    (*out)[0] = static_cast<int>(value_h);
    (*out)[1] = static_cast<int>(value_w);
    return;
  }
  if (required)
    CREMA_CHECK_PARAM(num_values > 0, field, "must be given (or ", hw, "_h and ", hw, "_w)");
  if (num_values == 0) return;
  CREMA_CHECK_PARAM(num_values == 1 || num_values == num_spatial_axes_, field,
                    "must be given once, or once per spatial axis (", num_spatial_axes_, "), got ",
                    num_values, " values");
  for (int i = 0; i < num_spatial_axes_; ++i)
    (*out)[i] = static_cast<int>(values[num_values == 1 ? 0 : i]);
}

void BaseConvolutionLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& param = layer_param_.convolution_param();
  force_nd_im2col_ = param.force_nd_im2col();
  {
    const int axis = param.axis();
    const int num_axes = bottom[0]->num_axes();
    CREMA_CHECK_PARAM(axis >= -num_axes && axis < num_axes, "convolution_param.axis",
                      "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", axis);
    channel_axis_ = bottom[0]->CanonicalAxisIndex(axis);
    num_spatial_axes_ = num_axes - channel_axis_ - 1;
  }
  ReadSpatialParam("kernel_size", param.kernel_size_size(), param.kernel_size().data(),
                   param.has_kernel_h(), param.has_kernel_w(), param.kernel_h(), param.kernel_w(),
                   0, true, &kernel_shape_);
  for (int i = 0; i < num_spatial_axes_; ++i) {
    CREMA_CHECK_PARAM(kernel_shape_[i] > 0,
                      param.has_kernel_h() || param.has_kernel_w()
                          ? (i == 0 ? "convolution_param.kernel_h" : "convolution_param.kernel_w")
                          : "convolution_param.kernel_size",
                      "must be > 0, got ", kernel_shape_[i]);
  }
  ReadSpatialParam("stride", param.stride_size(), param.stride().data(), param.has_stride_h(),
                   param.has_stride_w(), param.stride_h(), param.stride_w(), 1, false, &stride_);
  for (int i = 0; i < num_spatial_axes_; ++i) {
    CREMA_CHECK_PARAM(stride_[i] > 0,
                      param.has_stride_h() || param.has_stride_w()
                          ? (i == 0 ? "convolution_param.stride_h" : "convolution_param.stride_w")
                          : "convolution_param.stride",
                      "must be > 0, got ", stride_[i]);
  }
  ReadSpatialParam("pad", param.pad_size(), param.pad().data(), param.has_pad_h(),
                   param.has_pad_w(), param.pad_h(), param.pad_w(), 0, false, &pad_);
  {
    const int n = param.dilation_size();
    CREMA_CHECK_PARAM(n == 0 || n == 1 || n == num_spatial_axes_, "convolution_param.dilation",
                      "must be given once, or once per spatial axis (", num_spatial_axes_,
                      "), got ", n, " values");
    dilation_.assign(num_spatial_axes_, 1);
    for (int i = 0; i < num_spatial_axes_ && n > 0; ++i) {
      dilation_[i] = static_cast<int>(param.dilation(n == 1 ? 0 : i));
      CREMA_CHECK_PARAM(dilation_[i] > 0, "convolution_param.dilation", "must be > 0, got ",
                        dilation_[i]);
    }
  }
  is_1x1_ = true;
  for (int i = 0; i < num_spatial_axes_; ++i)
    is_1x1_ &= kernel_shape_[i] == 1 && stride_[i] == 1 && pad_[i] == 0;

  channels_ = bottom[0]->shape(channel_axis_);
  num_output_ = static_cast<int>(param.num_output());
  CREMA_CHECK_PARAM(num_output_ > 0, "convolution_param.num_output", "must be > 0, got ",
                    num_output_);
  group_ = static_cast<int>(param.group());
  CREMA_CHECK_PARAM(group_ > 0, "convolution_param.group", "must be > 0, got ", group_);
  CREMA_CHECK_PARAM(channels_ % group_ == 0, "convolution_param.group",
                    "must divide the input channels: ", channels_, " channels, group ", group_);
  CREMA_CHECK_PARAM(num_output_ % group_ == 0, "convolution_param.group",
                    "must divide num_output: num_output ", num_output_, ", group ", group_);
  if (reverse_dimensions()) {
    conv_out_channels_ = channels_;
    conv_in_channels_ = num_output_;
  } else {
    conv_out_channels_ = num_output_;
    conv_in_channels_ = channels_;
  }

  std::vector<int> weight_shape = {conv_out_channels_, conv_in_channels_ / group_};
  weight_shape.insert(weight_shape.end(), kernel_shape_.begin(), kernel_shape_.end());
  bias_term_ = param.bias_term();
  const std::vector<int> bias_shape = {num_output_};
  // Weights that came with the parameter (a .caffemodel) are checked; else the fillers run.
  SetUpLearnableBlobs(WeightAndBias("convolution_param", weight_shape, param.weight_filler(),
                                    bias_term_, bias_shape, param.bias_filler()));
  kernel_dim_ = blobs_[0]->count(1);
  weight_offset_ = conv_out_channels_ * kernel_dim_ / group_;
  param_propagate_down_.assign(blobs_.size(), true);
  bias_multiplier_.set_dtype(dtype());
}

void BaseConvolutionLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int first_spatial_axis = channel_axis_ + 1;
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() == first_spatial_axis + num_spatial_axes_,
                    "the number of bottom axes may not change: set up with ",
                    first_spatial_axis + num_spatial_axes_, ", got bottom ",
                    bottom[0]->shape_string());
  CREMA_CHECK_SHAPE(bottom[0]->shape(channel_axis_) == channels_, "set up for ", channels_,
                    " input channels (axis ", channel_axis_, "), got bottom ",
                    bottom[0]->shape_string());
  for (size_t i = 1; i < bottom.size(); ++i) {
    CREMA_CHECK_SHAPE(bottom[i]->shape() == bottom[0]->shape(),
                      "all bottoms must have the same shape, got bottom 0 ",
                      bottom[0]->shape_string(), " and bottom ", i, " ", bottom[i]->shape_string());
  }
  for (size_t i = 0; i < top.size(); ++i)
    for (size_t j = 0; j < bottom.size(); ++j)
      CREMA_CHECK_SHAPE(top[i] != bottom[j], "does not support in-place computation (top ", i,
                        " is bottom ", j, ")");
  num_ = bottom[0]->count(0, channel_axis_);
  bottom_shape_ = bottom[0]->shape();
  ComputeOutputShape();
  // (A member: its memory stays from one pass to the next.)
  top_shape_.assign(bottom_shape_.begin(), bottom_shape_.begin() + channel_axis_);
  top_shape_.push_back(num_output_);
  top_shape_.insert(top_shape_.end(), output_shape_.begin(), output_shape_.end());
  for (Blob* t : top) t->Reshape(top_shape_);
  conv_out_spatial_dim_ = reverse_dimensions() ? bottom[0]->count(first_spatial_axis)
                                               : top[0]->count(first_spatial_axis);
  col_offset_ = kernel_dim_ * conv_out_spatial_dim_;
  output_offset_ = conv_out_channels_ * conv_out_spatial_dim_ / group_;
  covers_input_ = !reverse_dimensions() && group_ == 1 && conv_out_spatial_dim_ == 1;
  for (int i = 0; i < num_spatial_axes_ && covers_input_; ++i)
    covers_input_ = pad_[i] == 0 && dilation_[i] == 1 && kernel_shape_[i] == input_shape(i);
  conv_input_shape_.assign(num_spatial_axes_ + 1, 0);
  for (int i = 0; i <= num_spatial_axes_; ++i)
    conv_input_shape_[i] = reverse_dimensions() ? top[0]->shape(channel_axis_ + i)
                                                : bottom[0]->shape(channel_axis_ + i);
  col_buffer_shape_.assign(1, static_cast<int>(kernel_dim_ * group_));
  for (int i = 0; i < num_spatial_axes_; ++i)
    col_buffer_shape_.push_back(reverse_dimensions() ? input_shape(i) : output_shape_[i]);
  bottom_dim_ = bottom[0]->count(channel_axis_);
  top_dim_ = top[0]->count(channel_axis_);
  out_spatial_dim_ = top[0]->count(first_spatial_axis);
  if (bias_term_ && bias_multiplier_.count() != out_spatial_dim_) {
    bias_multiplier_.Reshape({static_cast<int>(out_spatial_dim_)});
    CREMA_DISPATCH_FLOAT(
        dtype(), T, cpu::Set<T>(out_spatial_dim_, T(1), bias_multiplier_.mutable_cpu_data<T>()));
  }
}

template <typename T>
void BaseConvolutionLayer::Im2colCpu(const T* data, T* col) {
  if (!force_nd_im2col_ && num_spatial_axes_ == 2) {
    cpu::Im2col<T>(data, conv_in_channels_, conv_input_shape_[1], conv_input_shape_[2],
                   kernel_shape_[0], kernel_shape_[1], pad_[0], pad_[1], stride_[0], stride_[1],
                   dilation_[0], dilation_[1], col);
  } else {
    cpu::Im2colNd<T>(data, num_spatial_axes_, conv_input_shape_.data(), col_buffer_shape_.data(),
                     kernel_shape_.data(), pad_.data(), stride_.data(), dilation_.data(), col);
  }
}

template <typename T>
void BaseConvolutionLayer::Col2imCpu(const T* col, T* data) {
  if (!force_nd_im2col_ && num_spatial_axes_ == 2) {
    cpu::Col2im<T>(col, conv_in_channels_, conv_input_shape_[1], conv_input_shape_[2],
                   kernel_shape_[0], kernel_shape_[1], pad_[0], pad_[1], stride_[0], stride_[1],
                   dilation_[0], dilation_[1], data);
  } else {
    cpu::Col2imNd<T>(col, num_spatial_axes_, conv_input_shape_.data(), col_buffer_shape_.data(),
                     kernel_shape_.data(), pad_.data(), stride_.data(), dilation_.data(), data);
  }
}

template <typename T>
void BaseConvolutionLayer::ForwardGemm(const T* input, const T* weights, T* output,
                                       bool skip_im2col) {
  const T* col_buff = input;
  if (!is_1x1_) {
    T* col = ColBuffer<T>();
    if (!skip_im2col) Im2colCpu(input, col);
    col_buff = col;
  }
  for (int g = 0; g < group_; ++g) {
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, conv_out_channels_ / group_,
                 static_cast<int>(conv_out_spatial_dim_), static_cast<int>(kernel_dim_), T(1),
                 weights + weight_offset_ * g, col_buff + col_offset_ * g, T(0),
                 output + output_offset_ * g);
  }
}

template <typename T>
void BaseConvolutionLayer::ForwardBias(T* output, const T* bias) {
  cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, num_output_, static_cast<int>(out_spatial_dim_), 1,
               T(1), bias, bias_multiplier_.cpu_data<T>(), T(1), output);
}

template <typename T>
void BaseConvolutionLayer::BackwardGemm(const T* output, const T* weights, T* input) {
  T* col_buff = is_1x1_ ? input : ColBuffer<T>();
  for (int g = 0; g < group_; ++g) {
    cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, static_cast<int>(kernel_dim_),
                 static_cast<int>(conv_out_spatial_dim_), conv_out_channels_ / group_, T(1),
                 weights + weight_offset_ * g, output + output_offset_ * g, T(0),
                 col_buff + col_offset_ * g);
  }
  if (!is_1x1_) Col2imCpu(static_cast<const T*>(col_buff), input);
}

template <typename T>
void BaseConvolutionLayer::WeightGemm(const T* input, const T* output, T* weights) {
  const T* col_buff = input;
  if (!is_1x1_) {
    T* col = ColBuffer<T>();
    Im2colCpu(input, col);
    col_buff = col;
  }
  for (int g = 0; g < group_; ++g) {
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, conv_out_channels_ / group_,
                 static_cast<int>(kernel_dim_), static_cast<int>(conv_out_spatial_dim_), T(1),
                 output + output_offset_ * g, col_buff + col_offset_ * g, T(1),
                 weights + weight_offset_ * g);
  }
}

template <typename T>
void BaseConvolutionLayer::BackwardBias(T* bias, const T* input) {
  cpu::Gemv<T>(cpu::Trans::kNo, num_output_, static_cast<int>(out_spatial_dim_), T(1), input,
               bias_multiplier_.cpu_data<T>(), T(1), bias);
}

int64_t BaseConvolutionLayer::BatchChunk(int64_t bytes) const {
  const int64_t per_image = kernel_dim_ * group_ * conv_out_spatial_dim_ * bytes;
  return std::max<int64_t>(
      1, std::min<int64_t>(num_, kBatchColumnBytes / std::max<int64_t>(per_image, 1)));
}

template <typename T>
T* BaseConvolutionLayer::ColBuffer() {
  return workspace().Cpu<T>(kernel_dim_ * group_ * conv_out_spatial_dim_);
}

template <typename T>
void BaseConvolutionLayer::BatchScratch(int64_t chunk, T** col, T** out) {
  // The output part starts on a 64-byte boundary.
  const int64_t col_count = (kernel_dim_ * group_ * conv_out_spatial_dim_ * chunk + 15) / 16 * 16;
  const int64_t out_count = conv_out_channels_ * conv_out_spatial_dim_ * chunk;
  *col = workspace().Cpu<T>(col_count + out_count);
  *out = *col + col_count;
}

template <typename T>
void BaseConvolutionLayer::Im2colBatch(const T* data, int64_t images, T* col) {
  const int64_t ld = images * conv_out_spatial_dim_;
  const int64_t channels = conv_in_channels_;
  const int64_t kernel_volume = kernel_dim_ * group_ / conv_in_channels_;
  const int64_t in_spatial = bottom_dim_ / channels_;
  const int64_t units = images * channels;
  const bool nd = force_nd_im2col_ || num_spatial_axes_ != 2;
  std::vector<int> im_shape = conv_input_shape_;
  std::vector<int> col_shape = col_buffer_shape_;
  im_shape[0] = 1;
  col_shape[0] = static_cast<int>(kernel_volume);
#pragma omp parallel for if (units * kernel_volume * conv_out_spatial_dim_ > 65536)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t n = u / channels;
    const int64_t c = u % channels;
    const T* im = data + n * bottom_dim_ + c * in_spatial;
    T* dst = col + c * kernel_volume * ld + n * conv_out_spatial_dim_;
    if (!nd) {
      cpu::Im2colLd<T>(im, 1, conv_input_shape_[1], conv_input_shape_[2], kernel_shape_[0],
                       kernel_shape_[1], pad_[0], pad_[1], stride_[0], stride_[1], dilation_[0],
                       dilation_[1], dst, ld);
    } else {
      cpu::Im2colNdLd<T>(im, num_spatial_axes_, im_shape.data(), col_shape.data(),
                         kernel_shape_.data(), pad_.data(), stride_.data(), dilation_.data(), dst,
                         ld);
    }
  }
}

template <typename T>
void BaseConvolutionLayer::Col2imBatch(const T* col, int64_t images, T* data) {
  const int64_t ld = images * conv_out_spatial_dim_;
  const int64_t channels = conv_in_channels_;
  const int64_t kernel_volume = kernel_dim_ * group_ / conv_in_channels_;
  const int64_t in_spatial = bottom_dim_ / channels_;
  const int64_t units = images * channels;
  const bool nd = force_nd_im2col_ || num_spatial_axes_ != 2;
  std::vector<int> im_shape = conv_input_shape_;
  std::vector<int> col_shape = col_buffer_shape_;
  im_shape[0] = 1;
  col_shape[0] = static_cast<int>(kernel_volume);
#pragma omp parallel for if (units * kernel_volume * conv_out_spatial_dim_ > 65536)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t n = u / channels;
    const int64_t c = u % channels;
    T* im = data + n * bottom_dim_ + c * in_spatial;
    const T* src = col + c * kernel_volume * ld + n * conv_out_spatial_dim_;
    if (!nd) {
      cpu::Col2imLd<T>(src, ld, 1, conv_input_shape_[1], conv_input_shape_[2], kernel_shape_[0],
                       kernel_shape_[1], pad_[0], pad_[1], stride_[0], stride_[1], dilation_[0],
                       dilation_[1], im);
    } else {
      cpu::Col2imNdLd<T>(src, ld, num_spatial_axes_, im_shape.data(), col_shape.data(),
                         kernel_shape_.data(), pad_.data(), stride_.data(), dilation_.data(), im);
    }
  }
}

template <typename T>
void BaseConvolutionLayer::Forward1x1(const T* bottom, const T* weights, const T* bias, T* top) {
  const int64_t spatial = conv_out_spatial_dim_;
  const int out_per_group = conv_out_channels_ / group_;
  for (int64_t n = 0; n < num_; ++n) {
    const T* in = bottom + n * bottom_dim_;
    T* out = top + n * top_dim_;
    for (int g = 0; g < group_; ++g) {
      cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, out_per_group, static_cast<int>(spatial),
                   static_cast<int>(kernel_dim_), T(1), weights + weight_offset_ * g,
                   in + col_offset_ * g, T(0), out + output_offset_ * g);
    }
    if (bias == nullptr && !fused_relu()) continue;
    const T slope = static_cast<T>(fused_relu_slope());
#pragma omp parallel for if (num_output_ * spatial > 65536)
    for (int m = 0; m < num_output_; ++m) {
      T* dst = out + m * spatial;
      if (bias != nullptr) {
        const T b = bias[m];
        for (int64_t s = 0; s < spatial; ++s) dst[s] += b;
      }
      if (fused_relu())
        for (int64_t s = 0; s < spatial; ++s) dst[s] = ReLUValue(dst[s], slope);
    }
  }
}

template <typename T>
void BaseConvolutionLayer::Backward1x1(const T* top_diff, const T* bottom, const T* weights,
                                       T* weight_diff, T* bottom_diff) {
  const int64_t spatial = conv_out_spatial_dim_;
  const int out_per_group = conv_out_channels_ / group_;
  for (int64_t n = 0; n < num_; ++n) {
    const T* out = top_diff + n * top_dim_;
    for (int g = 0; g < group_; ++g) {
      if (weight_diff != nullptr) {
        cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, out_per_group,
                     static_cast<int>(kernel_dim_), static_cast<int>(spatial), T(1),
                     out + output_offset_ * g, bottom + n * bottom_dim_ + col_offset_ * g, T(1),
                     weight_diff + weight_offset_ * g);
      }
      if (bottom_diff != nullptr) {
        cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, static_cast<int>(kernel_dim_),
                     static_cast<int>(spatial), out_per_group, T(1), weights + weight_offset_ * g,
                     out + output_offset_ * g, T(0),
                     bottom_diff + n * bottom_dim_ + col_offset_ * g);
      }
    }
  }
}

template <typename T>
bool BaseConvolutionLayer::ForwardCoversInput(const T* bottom, const T* weights, const T* bias,
                                              T* top) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (!covers_input_) return false;
    // Both sides are row-major matrices already: bottom's image n is row n of kernel_dim_
    // values in im2col's (channel, kernel position) order, top's image n is row n of outputs.
    cpu::GemmFewRows(static_cast<int>(num_), num_output_, static_cast<int>(kernel_dim_), bottom,
                     weights, top);
    if (bias == nullptr && !fused_relu()) return true;
    const float slope = static_cast<float>(fused_relu_slope());
    for (int64_t n = 0; n < num_; ++n) {
      float* dst = top + n * top_dim_;
      for (int m = 0; m < num_output_; ++m) {
        const float value = bias != nullptr ? dst[m] + bias[m] : dst[m];
        dst[m] = fused_relu() ? ReLUValue(value, slope) : value;
      }
    }
    return true;
  }
}

template <typename T>
bool BaseConvolutionLayer::BackwardCoversInput(const T* top_diff, const T* bottom, const T* weights,
                                               T* weight_diff, T* bottom_diff) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (!covers_input_) return false;
    cpu::GemmFewRowsBackward(static_cast<int>(num_), num_output_, static_cast<int>(kernel_dim_),
                             top_diff, bottom, weights, weight_diff, /*accumulate=*/true,
                             bottom_diff);
    return true;
  }
}

template <typename T>
void BaseConvolutionLayer::ForwardBatch(const T* bottom, const T* weights, const T* bias, T* top) {
  CREMA_ASSERT(!reverse_dimensions(), "ForwardBatch is for forward convolution");
  if (ForwardCoversInput(bottom, weights, bias, top)) return;
  if (is_1x1_) {
    Forward1x1(bottom, weights, bias, top);
    return;
  }
  const int64_t spatial = conv_out_spatial_dim_;
  const int64_t chunk = BatchChunk(sizeof(T));
  T* col = nullptr;
  T* out = nullptr;
  BatchScratch(chunk, &col, &out);
  const int out_per_group = conv_out_channels_ / group_;
  for (int64_t n0 = 0; n0 < num_; n0 += chunk) {
    const int64_t images = std::min(chunk, num_ - n0);
    const int64_t ld = images * spatial;
    Im2colBatch(bottom + n0 * bottom_dim_, images, col);
    for (int g = 0; g < group_; ++g) {
      cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, out_per_group, static_cast<int>(ld),
                   static_cast<int>(kernel_dim_), T(1), weights + weight_offset_ * g,
                   col + kernel_dim_ * ld * g, T(0), out + out_per_group * ld * g);
    }
    // Scatter (out channels) x (images * spatial) into (images, out channels, spatial), adding
    // the bias and applying a fused ReLU on the way.
    const int64_t units = images * conv_out_channels_;
    const T slope = static_cast<T>(fused_relu_slope());
#pragma omp parallel for if (units * spatial > 65536)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n = u / conv_out_channels_;
      const int64_t m = u % conv_out_channels_;
      const T* src = out + m * ld + n * spatial;
      T* dst = top + (n0 + n) * top_dim_ + m * spatial;
      const T b = bias != nullptr ? bias[m] : T(0);
      if (fused_relu() && bias != nullptr) {
        for (int64_t s = 0; s < spatial; ++s) dst[s] = ReLUValue(src[s] + b, slope);
      } else if (fused_relu()) {
        for (int64_t s = 0; s < spatial; ++s) dst[s] = ReLUValue(src[s], slope);
      } else if (bias != nullptr) {
        for (int64_t s = 0; s < spatial; ++s) dst[s] = src[s] + b;
      } else {
        std::copy(src, src + spatial, dst);
      }
    }
  }
}

template <typename T>
void BaseConvolutionLayer::BackwardBatch(const T* top_diff, const T* bottom, const T* weights,
                                         T* weight_diff, T* bias_diff, T* bottom_diff) {
  CREMA_ASSERT(!reverse_dimensions(), "BackwardBatch is for forward convolution");
  const int64_t spatial = conv_out_spatial_dim_;
  if (bias_diff != nullptr) {
    // bias[m] += sum over images and positions; each output channel on its own, images in order.
#pragma omp parallel for if (num_ * num_output_ * spatial > 65536)
    for (int m = 0; m < num_output_; ++m) {
      T acc = bias_diff[m];
      for (int64_t n = 0; n < num_; ++n) {
        const T* src = top_diff + n * top_dim_ + m * spatial;
        T lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t s = 0;
        for (; s + 8 <= spatial; s += 8)
          for (int l = 0; l < 8; ++l) lane[l] += src[s + l];
        T sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        for (; s < spatial; ++s) sum += src[s];
        acc += sum;
      }
      bias_diff[m] = acc;
    }
  }
  if (weight_diff == nullptr && bottom_diff == nullptr) return;
  if (BackwardCoversInput(top_diff, bottom, weights, weight_diff, bottom_diff)) return;
  if (is_1x1_) {
    Backward1x1(top_diff, bottom, weights, weight_diff, bottom_diff);
    return;
  }
  const int64_t chunk = BatchChunk(sizeof(T));
  T* col = nullptr;
  T* out = nullptr;
  BatchScratch(chunk, &col, &out);
  const int out_per_group = conv_out_channels_ / group_;
  for (int64_t n0 = 0; n0 < num_; n0 += chunk) {
    const int64_t images = std::min(chunk, num_ - n0);
    const int64_t ld = images * spatial;
    // Gather top diff (images, out channels, spatial) into (out channels) x (images * spatial).
    const int64_t units = images * conv_out_channels_;
#pragma omp parallel for if (units * spatial > 65536)
    for (int64_t u = 0; u < units; ++u) {
      const int64_t n = u / conv_out_channels_;
      const int64_t m = u % conv_out_channels_;
      const T* src = top_diff + (n0 + n) * top_dim_ + m * spatial;
      std::copy(src, src + spatial, out + m * ld + n * spatial);
    }
    if (weight_diff != nullptr) {
      Im2colBatch(bottom + n0 * bottom_dim_, images, col);
      // A small weight (e.g. 20 x 25) over a long inner dimension gives BLAS threads nothing to
      // split: cut the inner dimension into fixed slices (their number depends on the shape
      // only, never on the thread count), one GEMM each in parallel, summed in slice order.
      constexpr int64_t kSlice = 4096;
      const int64_t weight_count = out_per_group * kernel_dim_;
      const int64_t slices = (ld + kSlice - 1) / kSlice;
      const bool split = weight_count <= 4096 && slices >= 2;
      // Every element is written by its slice's GEMM (beta 0): no value-initialisation.
      std::unique_ptr<T[]> partial(split ? new T[slices * weight_count] : nullptr);
      for (int g = 0; g < group_; ++g) {
        const T* out_g = out + out_per_group * ld * g;
        const T* col_g = col + kernel_dim_ * ld * g;
        T* weight_diff_g = weight_diff + weight_offset_ * g;
        if (!split) {
          cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, out_per_group,
                       static_cast<int>(kernel_dim_), static_cast<int>(ld), T(1), out_g, col_g,
                       T(1), weight_diff_g);
          continue;
        }
#pragma omp parallel for
        for (int64_t p = 0; p < slices; ++p) {
          const int64_t k0 = p * kSlice;
          cpu::GemmLd<T>(cpu::Trans::kNo, cpu::Trans::kYes, out_per_group,
                         static_cast<int>(kernel_dim_), static_cast<int>(std::min(kSlice, ld - k0)),
                         T(1), out_g + k0, static_cast<int>(ld), col_g + k0, static_cast<int>(ld),
                         T(0), partial.get() + p * weight_count, static_cast<int>(kernel_dim_));
        }
        for (int64_t e = 0; e < weight_count; ++e) {
          T sum = 0;
          for (int64_t p = 0; p < slices; ++p) sum += partial[p * weight_count + e];
          weight_diff_g[e] += sum;
        }
      }
    }
    if (bottom_diff != nullptr) {
      for (int g = 0; g < group_; ++g) {
        cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, static_cast<int>(kernel_dim_),
                     static_cast<int>(ld), out_per_group, T(1), weights + weight_offset_ * g,
                     out + out_per_group * ld * g, T(0), col + kernel_dim_ * ld * g);
      }
      Col2imBatch(col, images, bottom_diff + n0 * bottom_dim_);
    }
  }
}

#define CREMA_INSTANTIATE_BASE_CONV(T)                                                   \
  template void BaseConvolutionLayer::ForwardGemm<T>(const T*, const T*, T*, bool);      \
  template void BaseConvolutionLayer::ForwardBias<T>(T*, const T*);                      \
  template void BaseConvolutionLayer::BackwardGemm<T>(const T*, const T*, T*);           \
  template void BaseConvolutionLayer::WeightGemm<T>(const T*, const T*, T*);             \
  template void BaseConvolutionLayer::BackwardBias<T>(T*, const T*);                     \
  template void BaseConvolutionLayer::ForwardBatch<T>(const T*, const T*, const T*, T*); \
  template void BaseConvolutionLayer::BackwardBatch<T>(const T*, const T*, const T*, T*, T*, T*);
CREMA_INSTANTIATE_BASE_CONV(float)
CREMA_INSTANTIATE_BASE_CONV(double)
#undef CREMA_INSTANTIATE_BASE_CONV

}  // namespace crema
