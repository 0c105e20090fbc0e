#include "layers/batch_norm/batch_norm_layer.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "crema/layer_registry.hpp"
#include "layers/scale/scale_layer.hpp"
#include "math/activation.hpp"
#include "math/channel_loops.hpp"
#include "math/dnnl_engine.hpp"

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

template <typename T, int B>
void BatchNormLayer::ForwardT(const Blob& bottom, Blob* top) {
  constexpr cpu::Block<B> block;
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
    // One pass for both statistics: the sums of d = x - p and d * d in double, p a value of the
    // channel (its first), so that var = E[d^2] - E[d]^2 subtracts numbers of the size of the
    // variance (x's distance from p), not of mean^2. Two passes (the mean, then E[(x - mean)^2])
    // read the blob once more: a pass over the largest activations of a training iteration.
    std::vector<double> pivot(channels_, 0.0);
    if (m > 0)
      for (int c = 0; c < channels_; ++c)
        pivot[c] = bottom_data[cpu::ChannelStart(c, spatial_dim_, block)];
    cpu::ChannelSumPairs<double>(
        num_, channels_, spatial_dim_,
        [bottom_data, &pivot](int64_t c, int64_t k, double* s) {
          const double d = static_cast<double>(bottom_data[k]) - pivot[c];
          s[0] = d;
          s[1] = d * d;
        },
        mean.data(), var.data(), block);
    for (int c = 0; c < channels_; ++c) {
      const double shift = m > 0 ? mean[c] / m : 0;
      mean[c] = pivot[c] + shift;
      var[c] = m > 0 ? std::max(var[c] / m - shift * shift, 0.0) : 0;
    }
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
  // A fused Scale (and ReLU): the Scale's own operations on y, in the same pass
  // (ScaleLayer::ForwardT: y * scale + bias, then the ReLU).
  const T* scale = nullptr;
  const T* bias = nullptr;
  if (ran_fused_ != nullptr) {
    // The Scale reads this layer's kept output as its input in a Backward of its own.
    ran_fused_->set_bottom_kept_by(x_norm != nullptr ? &x_norm_ : nullptr);
    scale = ran_fused_->blobs()[0]->cpu_data<T>();
    if (const Blob* b = ran_fused_->bias_blob(); b != nullptr) bias = b->cpu_data<T>();
  }
  const bool relu = ran_fused_ != nullptr && ran_fused_relu_;
  const T slope = static_cast<T>(ran_fused_slope_);
  // Each combination its own loop, so that each vectorises.
  const auto normalize = [&](auto keep, auto fused, auto with_bias, auto with_relu) {
    cpu::ForEachChannelPlane(
        num_, channels_, spatial_dim_,
        [&](int64_t c0, int64_t offset) {
          // The block's constants in arrays of its own (the writes below cannot alias them).
          T mu[B], inv_std[B], s[B], b[B];
          for (int j = 0; j < B; ++j) {
            mu[j] = static_cast<T>(mean[c0 + j]);
            inv_std[j] = static_cast<T>(1 / std_[c0 + j]);
            s[j] = fused ? scale[c0 + j] : T(1);
            b[j] = with_bias ? bias[c0 + j] : T(0);
          }
          const T* x = bottom_data + offset;
          T* kept = decltype(keep)::value ? x_norm + offset : nullptr;
          T* out = top_data + offset;
          for (int64_t i = 0; i < spatial_dim_ * B; i += B)
            for (int j = 0; j < B; ++j) {
              const T y = (x[i + j] - mu[j]) * inv_std[j];
              if constexpr (decltype(keep)::value) kept[i + j] = y;
              if constexpr (!decltype(fused)::value) {
                out[i + j] = y;
              } else {
                T z = y * s[j];
                if constexpr (decltype(with_bias)::value) z = z + b[j];
                if constexpr (decltype(with_relu)::value) z = ReLUValue(z, slope);
                out[i + j] = z;
              }
            }
        },
        block);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const auto with_keep = [&](auto fused, auto with_bias, auto with_relu) {
    if (x_norm != nullptr)
      normalize(Yes{}, fused, with_bias, with_relu);
    else
      normalize(No{}, fused, with_bias, with_relu);
  };
  if (scale == nullptr)
    with_keep(No{}, No{}, No{});
  else if (bias != nullptr)
    relu ? with_keep(Yes{}, Yes{}, Yes{}) : with_keep(Yes{}, Yes{}, No{});
  else
    relu ? with_keep(Yes{}, No{}, Yes{}) : with_keep(Yes{}, No{}, No{});
}

template <typename T, int B>
void BatchNormLayer::BackwardT(const Blob& top, Blob* bottom) {
  constexpr cpu::Block<B> block;
  // In place, top diff and bottom diff are one buffer: read all sums before writing.
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  if (use_global_stats_) {
    cpu::ForEachChannelPlane(
        num_, channels_, spatial_dim_,
        [&](int64_t c0, int64_t offset) {
          T inv_std[B];
          for (int j = 0; j < B; ++j) inv_std[j] = static_cast<T>(1 / std_[c0 + j]);
          for (int64_t i = 0; i < spatial_dim_ * B; i += B)
            for (int j = 0; j < B; ++j)
              bottom_diff[offset + i + j] = top_diff[offset + i + j] * inv_std[j];
        },
        block);
    return;
  }
  const T* y = x_norm_.cpu_data<T>();
  const int64_t m = static_cast<int64_t>(num_) * spatial_dim_;
  std::vector<double> sum_dy(channels_, 0.0), sum_dy_y(channels_, 0.0);
  cpu::ChannelSumPairs<double>(
      num_, channels_, spatial_dim_,
      [top_diff, y](int64_t, int64_t k, double* s) {
        s[0] = static_cast<double>(top_diff[k]);
        s[1] = static_cast<double>(top_diff[k]) * y[k];
      },
      sum_dy.data(), sum_dy_y.data(), block);
  cpu::ForEachChannelPlane(
      num_, channels_, spatial_dim_,
      [&](int64_t c0, int64_t offset) {
        T mean_dy[B], mean_dy_y[B], inv_std[B];
        for (int j = 0; j < B; ++j) {
          mean_dy[j] = static_cast<T>(sum_dy[c0 + j] / m);
          mean_dy_y[j] = static_cast<T>(sum_dy_y[c0 + j] / m);
          inv_std[j] = static_cast<T>(1 / std_[c0 + j]);
        }
        for (int64_t i = offset; i < offset + spatial_dim_ * B; i += B)
          for (int j = 0; j < B; ++j)
            bottom_diff[i + j] =
                (top_diff[i + j] - mean_dy[j] - y[i + j] * mean_dy_y[j]) * inv_std[j];
      },
      block);
}

void BatchNormLayer::set_fused_scale(ScaleLayer* scale, bool relu, float negative_slope) {
  fused_scale_ = scale;
  scale_relu_ = scale != nullptr && relu;
  scale_relu_slope_ = negative_slope;
}

bool BatchNormLayer::ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) {
  return fused_scale_ != nullptr && (top[0] == bottom[0] || top[0]->channel_block_allowed());
}

bool BatchNormLayer::BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) {
  // The top's value too: the fused ReLU's gradient reads it.
  return forward_block_ > 0 && top[0]->cpu_diff_channel_block() == forward_block_ &&
         top[0]->cpu_channel_block() == forward_block_ &&
         (top[0] == bottom[0] || bottom[0]->channel_block_allowed());
}

void BatchNormLayer::PlainXNorm() {
  const SyncedMemory* memory = x_norm_.data().get();
  if (memory == nullptr || memory->channel_block() == 0) return;
  ChannelBlockedToPlain(x_norm_.shape(), memory->channel_block(), x_norm_.mutable_cpu_data<float>(),
                        &workspace());
  x_norm_.data()->set_channel_block(0);
}

int BatchNormLayer::BackwardBlock(const Blob& top) {
  const int block = top.cpu_diff_channel_block();
  if (block == 0) PlainXNorm();
  CREMA_ASSERT(block == 0 || block == forward_block_, name(), ": gradient blocked by ", block,
               ", values by ", forward_block_);
  return block;
}

void BatchNormLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  ran_fused_ = fused_scale_;
  ran_fused_relu_ = scale_relu_;
  ran_fused_slope_ = scale_relu_slope_;
  // Blocked only where the net let it through (ReadsChannelBlocked): the top, and y, alike.
  forward_block_ = bottom[0]->cpu_channel_block();
  cpu::WithChannelBlock(forward_block_, [&](auto block) {
    CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T, decltype(block)::value>(*bottom[0], top[0]));
  });
  for (Blob* blob : {top[0] != bottom[0] ? top[0] : nullptr, keeps_x_norm() ? &x_norm_ : nullptr})
    if (blob != nullptr && blob->data()) blob->data()->set_channel_block(forward_block_);
}

void BatchNormLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  // The statistics get no gradient, whatever param_propagate_down says.
  if (!propagate_down[0]) return;
  const int block = BackwardBlock(*top[0]);
  cpu::WithChannelBlock(block, [&](auto b) {
    CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T, decltype(b)::value>(*top[0], bottom[0]));
  });
  if (top[0] != bottom[0] && bottom[0]->diff()) bottom[0]->diff()->set_channel_block(block);
}

template <typename T, int B>
void BatchNormLayer::BackwardFusedT(Blob* top, bool propagate_down, Blob* bottom) {
  if (ran_fused_relu_)
    BackwardFusedT<T, true, B>(top, propagate_down, bottom);
  else
    BackwardFusedT<T, false, B>(top, propagate_down, bottom);
}

template <typename T, bool kRelu, int B>
void BatchNormLayer::BackwardFusedT(Blob* top, bool propagate_down, Blob* bottom) {
  constexpr cpu::Block<B> block;
  const ScaleLayer& scale_layer = *ran_fused_;
  // The gradient of the Scale's output: through the fused ReLU as ReLULayer::Backward takes it
  // (reading the ReLU's output, the top's data).
  const T* out = top->cpu_data<T>();
  const T* dout = top->cpu_diff<T>();
  const T slope = static_cast<T>(ran_fused_slope_);
  const auto dz = [=](int64_t k) {
    if constexpr (kRelu) return dout[k] * (out[k] > 0 ? T(1) : slope);
    return dout[k];
  };
  const T* y = x_norm_.cpu_data<T>();
  const T* scale = scale_layer.blobs()[0]->cpu_data<T>();
  T* scale_diff =
      scale_layer.param_propagate_down(0) ? scale_layer.blobs()[0]->mutable_cpu_diff<T>() : nullptr;
  T* bias_diff =
      scale_layer.bias_diff_wanted() ? scale_layer.bias_blob()->mutable_cpu_diff<T>() : nullptr;
  // The top's diff ends as the layers one by one leave it: the bottom's gradient in place; else
  // the Scale's input gradient when it passes one down, else the ReLU's input gradient.
  T* top_diff = top->mutable_cpu_diff<T>();
  T* scale_input_diff = propagate_down && top != bottom ? top_diff : nullptr;
  T* relu_input_diff = !propagate_down && kRelu ? top_diff : nullptr;
  T* dx = propagate_down ? bottom->mutable_cpu_diff<T>() : nullptr;
  const int64_t m = static_cast<int64_t>(num_) * spatial_dim_;
  // The Scale's parameter diffs accumulate its sums in T, as ScaleLayer::BackwardT.
  std::vector<T> scale_sums(channels_), bias_sums(channels_);
  const auto accumulate = [&] {
    for (int c = 0; c < channels_; ++c) {
      if (scale_diff != nullptr) scale_diff[c] = scale_diff[c] + scale_sums[c];
      if (bias_diff != nullptr) bias_diff[c] = bias_diff[c] + bias_sums[c];
    }
  };
  // dx (and the Scale's input gradient dy = dz * scale, when kept) per block of channels:
  // f(j, dy, y) for channel c0 + j, with the block's constants captured by value (so that the
  // writes cannot alias them).
  const auto input_gradient = [&](int64_t c0, int64_t offset, const auto& f) {
    T s[B];
    for (int j = 0; j < B; ++j) s[j] = scale[c0 + j];
    const T* dz_top = dout + offset;
    const T* relu_out = out + offset;
    const T* y_plane = y + offset;
    T* dx_plane = dx + offset;
    const auto g = [=](int64_t i) {
      if constexpr (kRelu) return dz_top[i] * (relu_out[i] > 0 ? T(1) : slope);
      return dz_top[i];
    };
    if (scale_input_diff != nullptr) {
      T* dy_plane = scale_input_diff + offset;
      for (int64_t i = 0; i < spatial_dim_ * B; i += B)
        for (int j = 0; j < B; ++j) {
          const T dy = g(i + j) * s[j];
          dy_plane[i + j] = dy;
          dx_plane[i + j] = f(j, dy, y_plane[i + j]);
        }
    } else {
      for (int64_t i = 0; i < spatial_dim_ * B; i += B)
        for (int j = 0; j < B; ++j) dx_plane[i + j] = f(j, g(i + j) * s[j], y_plane[i + j]);
    }
  };
  // The per-channel constants of a block, in an array the lambdas copy.
  struct Constants {
    T v[B];
  };
  if (!use_global_stats_ && propagate_down) {
    // One pass for the four sums the three layers take: the Scale's (in T) and the BatchNorm's
    // mean(dy), mean(dy * y) (in double) of dy = dz * scale, its input gradient.
    std::vector<double> sum_dy(channels_), sum_dy_y(channels_);
    cpu::ChannelSumsTwoByTwo<T, double>(
        num_, channels_, spatial_dim_,
        [&](int64_t c, int64_t k, T* a, double* d) {
          const T g = dz(k);
          const T dy = g * scale[c];
          a[0] = g * y[k];
          a[1] = g;
          d[0] = static_cast<double>(dy);
          d[1] = static_cast<double>(dy) * y[k];
        },
        scale_sums.data(), bias_sums.data(), sum_dy.data(), sum_dy_y.data(), block);
    accumulate();
    cpu::ForEachChannelPlane(
        num_, channels_, spatial_dim_,
        [&](int64_t c0, int64_t offset) {
          Constants mean_dy, mean_dy_y, inv_std;
          for (int j = 0; j < B; ++j) {
            mean_dy.v[j] = static_cast<T>(sum_dy[c0 + j] / m);
            mean_dy_y.v[j] = static_cast<T>(sum_dy_y[c0 + j] / m);
            inv_std.v[j] = static_cast<T>(1 / std_[c0 + j]);
          }
          input_gradient(c0, offset, [=](int j, T dy, T y_value) {
            return (dy - mean_dy.v[j] - y_value * mean_dy_y.v[j]) * inv_std.v[j];
          });
        },
        block);
    return;
  }
  // Global statistics, or no input gradient: the Scale's sums alone (as ChannelSums<T> takes
  // them), then dx = dy / sqrt(var + eps).
  if (scale_diff != nullptr || bias_diff != nullptr) {
    cpu::ChannelSums<T>(
        num_, channels_, spatial_dim_, [&](int64_t, int64_t k) { return dz(k) * y[k]; },
        scale_sums.data(), block);
    cpu::ChannelSums<T>(
        num_, channels_, spatial_dim_, [&](int64_t, int64_t k) { return dz(k); }, bias_sums.data(),
        block);
    accumulate();
  }
  if (relu_input_diff != nullptr) {
    cpu::ForEachChannelPlane(
        num_, channels_, spatial_dim_,
        [&](int64_t, int64_t offset) {
          for (int64_t k = offset; k < offset + spatial_dim_ * B; ++k) relu_input_diff[k] = dz(k);
        },
        block);
  }
  if (dx == nullptr) return;
  cpu::ForEachChannelPlane(
      num_, channels_, spatial_dim_,
      [&](int64_t c0, int64_t offset) {
        Constants inv_std;
        for (int j = 0; j < B; ++j) inv_std.v[j] = static_cast<T>(1 / std_[c0 + j]);
        input_gradient(c0, offset, [=](int j, T dy, T) { return dy * inv_std.v[j]; });
      },
      block);
}

void BatchNormLayer::BackwardFused(const BlobVec& top, bool propagate_down, const BlobVec& bottom) {
  CREMA_ASSERT(ran_fused_ != nullptr && keeps_x_norm(), name());
  if (bottom[0]->count() == 0) return;
#ifdef CREMA_WITH_CUDA
  if (device().is_cuda()) return BackwardFusedGpu(top, propagate_down, bottom);
#endif
  const int block = BackwardBlock(*top[0]);
  cpu::WithChannelBlock(block, [&](auto b) {
    CREMA_DISPATCH_FLOAT(dtype(), T,
                         BackwardFusedT<T, decltype(b)::value>(top[0], propagate_down, bottom[0]));
  });
  if (propagate_down && top[0] != bottom[0] && bottom[0]->diff())
    bottom[0]->diff()->set_channel_block(block);
}

CREMA_REGISTER_LAYER(BatchNorm, BatchNormLayer);

}  // namespace crema
