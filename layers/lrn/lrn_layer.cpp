#include "layers/lrn/lrn_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void LRNLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LRNParameter& param = layer_param_.lrn_param();
  size_ = static_cast<int>(param.local_size());
  CREMA_CHECK_PARAM(size_ % 2 == 1, "lrn_param.local_size", "must be odd, got ", size_);
  across_channels_ = param.norm_region() == LRNParameter::ACROSS_CHANNELS;
  alpha_ = param.alpha();
  beta_ = param.beta();
  k_ = param.k();
  scale_.set_dtype(dtype());
  buffer_.set_dtype(dtype());
  sums_.set_dtype(dtype());
}

void LRNLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() == 4,
                    "needs a bottom of 4 axes (num, channels, height, width), got ",
                    bottom[0]->shape_string());
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "does not support in-place computation");
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  buffer_.Reshape({channels_, height_, width_});
  sums_.Reshape({channels_, height_, width_});
}

template <typename T>
void LRNLayer::WindowSum(const T* in, T* out) const {
  const int half = (size_ - 1) / 2;
  const int64_t plane = static_cast<int64_t>(height_) * width_;
  if (across_channels_) {
    for (int c = 0; c < channels_; ++c) {
      T* o = out + c * plane;
      std::fill(o, o + plane, T(0));
      for (int cc = std::max(0, c - half); cc <= std::min(channels_ - 1, c + half); ++cc) {
        const T* i = in + cc * plane;
        for (int64_t p = 0; p < plane; ++p) o[p] += i[p];
      }
    }
    return;
  }
  for (int c = 0; c < channels_; ++c) {
    const T* i = in + c * plane;
    T* o = out + c * plane;
    for (int h = 0; h < height_; ++h)
      for (int w = 0; w < width_; ++w) {
        T sum = 0;
        for (int hh = std::max(0, h - half); hh <= std::min(height_ - 1, h + half); ++hh)
          for (int ww = std::max(0, w - half); ww <= std::min(width_ - 1, w + half); ++ww)
            sum += i[hh * width_ + ww];
        o[h * width_ + w] = sum;
      }
  }
}

template <typename T>
void LRNLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t image = static_cast<int64_t>(channels_) * height_ * width_;
  const T base = static_cast<T>(across_channels_ ? k_ : 1.0);
  const T coeff = static_cast<T>(across_channels_ ? alpha_ / size_ : alpha_ / (size_ * size_));
  const T neg_beta = static_cast<T>(-beta_);
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  // Forward only, s is not kept for Backward: each image's goes where its squares were.
  T* scale = forward_only() ? nullptr : scale_.mutable_cpu_data<T>();
  T* squares = buffer_.mutable_cpu_data<T>();
  T* sums = sums_.mutable_cpu_data<T>();
  for (int n = 0; n < num_; ++n) {
    const T* x = bottom_data + n * image;
    for (int64_t i = 0; i < image; ++i) squares[i] = x[i] * x[i];
    WindowSum(squares, sums);
    T* s = scale != nullptr ? scale + n * image : squares;
    T* y = top_data + n * image;
    for (int64_t i = 0; i < image; ++i) {
      s[i] = base + coeff * sums[i];
      y[i] = x[i] * std::pow(s[i], neg_beta);
    }
  }
}

template <typename T>
void LRNLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t image = static_cast<int64_t>(channels_) * height_ * width_;
  const double norm = across_channels_ ? size_ : size_ * size_;
  const T coeff = static_cast<T>(2 * alpha_ * beta_ / norm);
  const T neg_beta = static_cast<T>(-beta_);
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  const T* bottom_data = bottom->cpu_data<T>();
  const T* scale = scale_.cpu_data<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  T* ratio = buffer_.mutable_cpu_data<T>();
  T* sums = sums_.mutable_cpu_data<T>();
  for (int n = 0; n < num_; ++n) {
    const int64_t offset = n * image;
    for (int64_t i = 0; i < image; ++i)
      ratio[i] = top_diff[offset + i] * top_data[offset + i] / scale[offset + i];
    WindowSum(ratio, sums);
    for (int64_t i = 0; i < image; ++i)
      bottom_diff[offset + i] = top_diff[offset + i] * std::pow(scale[offset + i], neg_beta) -
                                coeff * bottom_data[offset + i] * sums[i];
  }
}

void LRNLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void LRNLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(LRN, LRNLayer);

}  // namespace crema
