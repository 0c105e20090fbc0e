#include "layers/im2col/im2col_layer.hpp"

#include <string>

#include "crema/layer_registry.hpp"
#include "math/im2col.hpp"

namespace crema {

void Im2colLayer::ReadSpatial(const char* name, const char* hw, int num_values,
                              const uint32_t* values, bool has_h, bool has_w, uint32_t value_h,
                              uint32_t value_w, int default_value, std::vector<int>* out) const {
  const std::string field = StrCat("convolution_param.", name);
  out->assign(num_spatial_axes_, default_value);
  if (has_h || has_w) {
    // As Caffe: both _h and _w are read; a missing one is its proto default (0).
    CREMA_CHECK_PARAM(num_spatial_axes_ == 2, StrCat("convolution_param.", hw, "_h"), "and ", hw,
                      "_w can only be used for 2-D input, the bottom has ", num_spatial_axes_,
                      " spatial axes");
    CREMA_CHECK_PARAM(num_values == 0, field, "is given both as ", name, " and as ", hw, "_h/", hw,
                      "_w; use one or the other");
    (*out)[0] = static_cast<int>(value_h);
    (*out)[1] = static_cast<int>(value_w);
    return;
  }
  if (num_values == 0) return;
  CREMA_CHECK_PARAM(num_values == 1 || num_values == num_spatial_axes_, field,
                    "must be given once, or once per spatial axis (", num_spatial_axes_, "), got ",
                    num_values, " values");
  for (int i = 0; i < num_spatial_axes_; ++i)
    (*out)[i] = static_cast<int>(values[num_values == 1 ? 0 : i]);
}

void Im2colLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConvolutionParameter& param = layer_param_.convolution_param();
  force_nd_im2col_ = param.force_nd_im2col();
  const int num_axes = bottom[0]->num_axes();
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "convolution_param.axis",
                    "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                    bottom[0]->shape_string(), ", got ", param.axis());
  channel_axis_ = bottom[0]->CanonicalAxisIndex(param.axis());
  num_spatial_axes_ = num_axes - channel_axis_ - 1;
  CREMA_CHECK_SHAPE(num_spatial_axes_ >= 1, "the bottom ", bottom[0]->shape_string(),
                    " needs at least one spatial axis after the channel axis ", channel_axis_);
  const bool kernel_hw = param.has_kernel_h() || param.has_kernel_w();
  CREMA_CHECK_PARAM(kernel_hw || param.kernel_size_size() > 0, "convolution_param.kernel_size",
                    "must be given (or kernel_h and kernel_w)");
  ReadSpatial("kernel_size", "kernel", param.kernel_size_size(), param.kernel_size().data(),
              param.has_kernel_h(), param.has_kernel_w(), param.kernel_h(), param.kernel_w(), 0,
              &kernel_shape_);
  ReadSpatial("stride", "stride", param.stride_size(), param.stride().data(), param.has_stride_h(),
              param.has_stride_w(), param.stride_h(), param.stride_w(), 1, &stride_);
  ReadSpatial("pad", "pad", param.pad_size(), param.pad().data(), param.has_pad_h(),
              param.has_pad_w(), param.pad_h(), param.pad_w(), 0, &pad_);
  ReadSpatial("dilation", "dilation", param.dilation_size(), param.dilation().data(), false, false,
              0, 0, 1, &dilation_);
  const bool stride_hw = param.has_stride_h() || param.has_stride_w();
  for (int i = 0; i < num_spatial_axes_; ++i) {
    CREMA_CHECK_PARAM(kernel_shape_[i] > 0,
                      kernel_hw
                          ? (i == 0 ? "convolution_param.kernel_h" : "convolution_param.kernel_w")
                          : "convolution_param.kernel_size",
                      "must be > 0, got ", kernel_shape_[i]);
    CREMA_CHECK_PARAM(stride_[i] > 0,
                      stride_hw
                          ? (i == 0 ? "convolution_param.stride_h" : "convolution_param.stride_w")
                          : "convolution_param.stride",
                      "must be > 0, got ", stride_[i]);
    CREMA_CHECK_PARAM(pad_[i] >= 0, "convolution_param.pad", "must be >= 0, got ", pad_[i]);
    CREMA_CHECK_PARAM(dilation_[i] > 0, "convolution_param.dilation", "must be > 0, got ",
                      dilation_[i]);
  }
}

void Im2colLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Im2col does not allow in-place computation");
  const Blob& in = *bottom[0];
  CREMA_CHECK_SHAPE(in.num_axes() == channel_axis_ + 1 + num_spatial_axes_,
                    "the bottom's number of axes may not change after set-up: was ",
                    channel_axis_ + 1 + num_spatial_axes_, ", got ", in.shape_string());
  std::vector<int> top_shape = in.shape();
  int64_t channels = in.shape(channel_axis_);
  for (int i = 0; i < num_spatial_axes_; ++i) {
    channels *= kernel_shape_[i];
    const int64_t input = in.shape(channel_axis_ + 1 + i);
    const int64_t extent = static_cast<int64_t>(dilation_[i]) * (kernel_shape_[i] - 1) + 1;
    const int64_t padded = input + 2 * static_cast<int64_t>(pad_[i]);
    CREMA_CHECK_SHAPE(padded >= extent, "spatial axis ", i, " of the bottom ", in.shape_string(),
                      " (", input, " + 2 * pad ", pad_[i], ") is smaller than the kernel extent ",
                      extent, " (kernel ", kernel_shape_[i], ", dilation ", dilation_[i], ")");
    top_shape[channel_axis_ + 1 + i] = static_cast<int>((padded - extent) / stride_[i] + 1);
  }
  CREMA_CHECK_SHAPE(channels <= INT32_MAX, "too many columns: ", channels);
  top_shape[channel_axis_] = static_cast<int>(channels);
  top[0]->Reshape(top_shape);
  num_ = in.count(0, channel_axis_);
  bottom_dim_ = in.count(channel_axis_);
  top_dim_ = top[0]->count(channel_axis_);
}

template <typename T>
void Im2colLayer::Forward(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int c = channel_axis_;
  for (int64_t n = 0; n < num_; ++n) {
    if (!force_nd_im2col_ && num_spatial_axes_ == 2) {
      cpu::Im2col<T>(bottom_data + n * bottom_dim_, bottom.shape(c), bottom.shape(c + 1),
                     bottom.shape(c + 2), kernel_shape_[0], kernel_shape_[1], pad_[0], pad_[1],
                     stride_[0], stride_[1], dilation_[0], dilation_[1], top_data + n * top_dim_);
    } else {
      cpu::Im2colNd<T>(bottom_data + n * bottom_dim_, num_spatial_axes_, bottom.shape().data() + c,
                       top->shape().data() + c, kernel_shape_.data(), pad_.data(), stride_.data(),
                       dilation_.data(), top_data + n * top_dim_);
    }
  }
}

template <typename T>
void Im2colLayer::Backward(const Blob& top, Blob* bottom) const {
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int c = channel_axis_;
  for (int64_t n = 0; n < num_; ++n) {
    if (!force_nd_im2col_ && num_spatial_axes_ == 2) {
      cpu::Col2im<T>(top_diff + n * top_dim_, bottom->shape(c), bottom->shape(c + 1),
                     bottom->shape(c + 2), kernel_shape_[0], kernel_shape_[1], pad_[0], pad_[1],
                     stride_[0], stride_[1], dilation_[0], dilation_[1],
                     bottom_diff + n * bottom_dim_);
    } else {
      cpu::Col2imNd<T>(top_diff + n * top_dim_, num_spatial_axes_, bottom->shape().data() + c,
                       top.shape().data() + c, kernel_shape_.data(), pad_.data(), stride_.data(),
                       dilation_.data(), bottom_diff + n * bottom_dim_);
    }
  }
}

void Im2colLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void Im2colLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Im2col, Im2colLayer);

}  // namespace crema
