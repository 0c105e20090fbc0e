#include "layers/batch_norm/batch_norm_layer.hpp"

#include <cmath>
#include <memory>
#include <string>

#include "crema/layer_registry.hpp"
#include "math/channel_loops.hpp"

namespace crema {

void BatchNormLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BatchNormParameter& param = layer_param_.batch_norm_param();
  use_global_stats_ = param.has_use_global_stats() ? param.use_global_stats() : phase_ == TEST;
  moving_average_fraction_ = param.moving_average_fraction();
  eps_ = param.eps();
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 1, "needs a bottom with at least one axis, got ",
                    bottom[0]->shape_string());
  channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
  // Statistics that came with the parameter (a .caffemodel) are checked and converted; new ones
  // are zeros.
  SetUpLearnableBlobs(
      {{"mean", {channels_}}, {"variance", {channels_}}, {"moving-average factor", {1}}});
  // The statistics are not learned: like Caffe, give them lr_mult 0 so solvers leave them alone.
  for (int i = 0; i < 3; ++i) {
    if (layer_param_.param_size() == i) {
      layer_param_.add_param()->set_lr_mult(0.f);
    } else {
      CREMA_CHECK_PARAM(layer_param_.param(i).lr_mult() == 0.f, StrCat("param[", i, "].lr_mult"),
                        "must be 0: BatchNorm's blobs are statistics, not learned parameters "
                        "(got ",
                        layer_param_.param(i).lr_mult(), ")");
    }
  }
  param_propagate_down_.assign(blobs_.size(), false);
  x_norm_.set_dtype(dtype());
}

void BatchNormLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& in = *bottom[0];
  CREMA_CHECK_SHAPE(
      in.num_axes() >= 1 && (in.num_axes() == 1 ? channels_ == 1 : in.shape(1) == channels_),
      "set up for ", channels_, " channels (axis 1), got bottom ", in.shape_string());
  num_ = in.shape(0);
  spatial_dim_ = num_ * channels_ > 0 ? in.count() / (static_cast<int64_t>(num_) * channels_) : 0;
  if (top[0] != bottom[0]) top[0]->ReshapeLike(in);
  // Global statistics: Backward does not read y, so none is kept unless a Scale reads it.
  if (keeps_x_norm())
    x_norm_.ReshapeLike(in);
  else
    x_norm_.Reshape(std::vector<int>{0});
  std_.assign(channels_, 1.0);
}

template <typename T>
void BatchNormLayer::ForwardT(const Blob& bottom, Blob* top) {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t m = static_cast<int64_t>(num_) * spatial_dim_;
  std::vector<double> mean(channels_, 0.0), var(channels_, 0.0);
  if (use_global_stats_) {
    const double stored = blobs_[2]->cpu_data<T>()[0];
    const double factor = stored == 0 ? 0 : 1 / stored;
    for (int c = 0; c < channels_; ++c) {
      mean[c] = factor * blobs_[0]->cpu_data<T>()[c];
      var[c] = factor * blobs_[1]->cpu_data<T>()[c];
    }
  } else {
    cpu::ChannelSums<double>(
        num_, channels_, spatial_dim_,
        [bottom_data](int64_t, int64_t k) { return static_cast<double>(bottom_data[k]); },
        mean.data());
    for (int c = 0; c < channels_; ++c) mean[c] = m > 0 ? mean[c] / m : 0;
    cpu::ChannelSums<double>(
        num_, channels_, spatial_dim_,
        [bottom_data, &mean](int64_t c, int64_t k) {
          return (bottom_data[k] - mean[c]) * (bottom_data[k] - mean[c]);
        },
        var.data());
    for (int c = 0; c < channels_; ++c) var[c] = m > 0 ? var[c] / m : 0;
    const T f = static_cast<T>(moving_average_fraction_);
    T* factor = blobs_[2]->mutable_cpu_data<T>();
    factor[0] = factor[0] * f + T(1);
    const double correction = m > 1 ? static_cast<double>(m) / (m - 1) : 1.0;
    T* moving_mean = blobs_[0]->mutable_cpu_data<T>();
    T* moving_var = blobs_[1]->mutable_cpu_data<T>();
    for (int c = 0; c < channels_; ++c) {
      moving_mean[c] = static_cast<T>(mean[c]) + f * moving_mean[c];
      moving_var[c] = static_cast<T>(correction * var[c]) + f * moving_var[c];
    }
  }
  for (int c = 0; c < channels_; ++c) std_[c] = std::sqrt(var[c] + eps_);
  T* x_norm = nullptr;
  if (keeps_x_norm()) {
    x_norm_.ReshapeLike(bottom);
    x_norm = x_norm_.mutable_cpu_data<T>();
  }
  cpu::ForEachChannelPlane(num_, channels_, spatial_dim_, [&](int64_t c, int64_t offset) {
    const T mu = static_cast<T>(mean[c]);
    const T inv_std = static_cast<T>(1 / std_[c]);
    if (x_norm == nullptr) {
      for (int64_t i = 0; i < spatial_dim_; ++i)
        top_data[offset + i] = (bottom_data[offset + i] - mu) * inv_std;
      return;
    }
    for (int64_t i = 0; i < spatial_dim_; ++i) {
      const T y = (bottom_data[offset + i] - mu) * inv_std;
      top_data[offset + i] = y;
      x_norm[offset + i] = y;
    }
  });
}

template <typename T>
void BatchNormLayer::BackwardT(const Blob& top, Blob* bottom) {
  // In place, top diff and bottom diff are one buffer: read all sums before writing.
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  if (use_global_stats_) {
    cpu::ForEachChannelPlane(num_, channels_, spatial_dim_, [&](int64_t c, int64_t offset) {
      const T inv_std = static_cast<T>(1 / std_[c]);
      for (int64_t i = 0; i < spatial_dim_; ++i)
        bottom_diff[offset + i] = top_diff[offset + i] * inv_std;
    });
    return;
  }
  const T* y = x_norm_.cpu_data<T>();
  const int64_t m = static_cast<int64_t>(num_) * spatial_dim_;
  std::vector<double> sum_dy(channels_, 0.0), sum_dy_y(channels_, 0.0);
  cpu::ChannelSums<double>(
      num_, channels_, spatial_dim_,
      [top_diff](int64_t, int64_t k) { return static_cast<double>(top_diff[k]); }, sum_dy.data());
  cpu::ChannelSums<double>(
      num_, channels_, spatial_dim_,
      [top_diff, y](int64_t, int64_t k) { return static_cast<double>(top_diff[k]) * y[k]; },
      sum_dy_y.data());
  cpu::ForEachChannelPlane(num_, channels_, spatial_dim_, [&](int64_t c, int64_t offset) {
    const T mean_dy = static_cast<T>(sum_dy[c] / m);
    const T mean_dy_y = static_cast<T>(sum_dy_y[c] / m);
    const T inv_std = static_cast<T>(1 / std_[c]);
    for (int64_t i = 0; i < spatial_dim_; ++i)
      bottom_diff[offset + i] =
          (top_diff[offset + i] - mean_dy - y[offset + i] * mean_dy_y) * inv_std;
  });
}

void BatchNormLayer::set_fused_scale(ScaleLayer* scale, bool relu, float negative_slope) {
  fused_scale_ = scale;
  scale_relu_ = scale != nullptr && relu;
  scale_relu_slope_ = negative_slope;
}

void BatchNormLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  // The CPU has no fused pass: the net runs the Scale (reading x_norm_) and the ReLU itself.
  ran_fused_ = nullptr;
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void BatchNormLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  // The statistics get no gradient, whatever param_propagate_down says.
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

#ifndef CREMA_WITH_CUDA
// Without CUDA no Forward runs fused (ForwardCpu clears ran_fused_), so the net never calls this;
// the GPU definition is in batch_norm_layer.cu.
void BatchNormLayer::BackwardFused(const BlobVec&, bool, const BlobVec&) {
  CREMA_ASSERT(false, name(), ": BackwardFused without a fused GPU Forward");
}
#endif

CREMA_REGISTER_LAYER(BatchNorm, BatchNormLayer);

}  // namespace crema
