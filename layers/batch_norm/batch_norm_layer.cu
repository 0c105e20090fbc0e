#include "layers/batch_norm/batch_norm_layer.hpp"
#include "layers/scale/scale_layer.hpp"
#include "math/channel_gpu.cuh"

namespace crema {
namespace {

using gpu::AddRn;
using gpu::MulRn;
using gpu::SubRn;

// Rows of the per-channel statistics blob (double, (kStatRows, C)).
constexpr int kMean = 0, kInvStd = 1, kMeanDy = 2, kMeanDyY = 3, kStatRows = 4;

// mean = blobs[0] / blobs[2], var = blobs[1] / blobs[2] (0 when blobs[2] is 0), per channel.
template <typename T>
__global__ void GlobalStats(int channels, const T* moving_mean, const T* moving_var,
                            const T* factor, double eps, double* stats) {
  CREMA_CUDA_KERNEL_LOOP(c, channels) {
    const double stored = factor[0];
    const double scale = stored == 0 ? 0 : 1 / stored;
    const double var = scale * moving_var[c];
    stats[kMean * channels + c] = scale * moving_mean[c];
    stats[kInvStd * channels + c] = 1 / sqrt(var + eps);
  }
}

// The input gradient of batch statistics from y's gradient dy, as the CPU:
// (dy - mean(dy) - y * mean(dy * y)) * inv_std.
template <typename T>
__device__ __forceinline__ T BatchGradient(T dy, T y, T mean_dy, T mean_dy_y, T inv_std) {
  return MulRn(SubRn(SubRn(dy, mean_dy), MulRn(y, mean_dy_y)), inv_std);
}

// The Scale (and ReLU) fused with a BatchNorm, as the kernels read them.
template <typename T>
struct FusedScale {
  const T* scale = nullptr;
  const T* bias = nullptr;  // null: no bias
  bool relu = false;
  T slope = 0;
  // The Scale's output from y.
  __device__ __forceinline__ T Forward(T y, int64_t c) const {
    T value = MulRn(y, scale[c]);
    if (bias != nullptr) value = AddRn(value, bias[c]);
    return relu ? gpu::ReLUForwardValue(value, slope) : value;
  }
};

// The gradient of a fused Scale's output from the group's top: through the ReLU when it was
// fused (reading its output, as the in-place ReLU layer does).
template <typename T>
struct ScaleOutputGradient {
  const T* out;
  const T* dout;
  bool relu;
  T slope;
  __device__ __forceinline__ T operator()(int64_t k) const {
    return relu ? gpu::ReLUBackwardValue(dout[k], out[k], slope) : dout[k];
  }
};

// A blob (num, channels, spatial) and the per-channel statistics (kStatRows, channels).
struct Shape {
  int64_t num;
  int channels;
  int64_t spatial;
  int64_t m() const { return num * spatial; }
};

// The batch mean and biased variance from the sums of x and x^2 in double; the moving averages
// as the CPU updates them.
template <typename T>
void BatchStatistics(const Shape& s, const T* x, double eps, T f, double* stats, T* moving_mean,
                     T* moving_var, T* factor) {
  const int64_t m = s.m();
  const int channels = s.channels;
  gpu::ChannelSums<2>(
      "BatchNorm statistics", s.num, s.channels, s.spatial,
      [x] __device__(const gpu::ChannelElement& e, double* v) {
        v[0] = x[e.k];
        v[1] = MulRn(static_cast<double>(x[e.k]), static_cast<double>(x[e.k]));
      },
      [=] __device__(int64_t c, const double* sums) {
        const double mean = m > 0 ? sums[0] / m : 0;
        const double square = m > 0 ? sums[1] / m - mean * mean : 0;
        const double var = square > 0 ? square : 0;
        stats[kMean * channels + c] = mean;
        stats[kInvStd * channels + c] = 1 / sqrt(var + eps);
        const double correction = m > 1 ? static_cast<double>(m) / (m - 1) : 1.0;
        moving_mean[c] = AddRn(static_cast<T>(mean), MulRn(f, moving_mean[c]));
        moving_var[c] = AddRn(static_cast<T>(correction * var), MulRn(f, moving_var[c]));
        if (c == 0) factor[0] = AddRn(MulRn(factor[0], f), T(1));
      });
}

// y = (x - mean) * inv_std, kept in x_norm when not null; then the fused Scale (and ReLU) when
// fused.scale is not null. In place safe.
template <typename T>
void Normalize(const Shape& s, const double* stats, const T* x, T* x_norm, T* y,
               FusedScale<T> fused) {
  const int channels = s.channels;
  gpu::ChannelMap("BatchNorm forward", s.num, s.channels, s.spatial,
                  [=] __device__(int64_t k, int64_t c) {
                    const T value = MulRn(SubRn(x[k], static_cast<T>(stats[kMean * channels + c])),
                                          static_cast<T>(stats[kInvStd * channels + c]));
                    if (x_norm != nullptr) x_norm[k] = value;
                    y[k] = fused.scale != nullptr ? fused.Forward(value, c) : value;
                  });
}

// Global statistics: dx = dy * inv_std, dy the Scale's input gradient (through the Scale, and
// the ReLU, when fused), also written to dy_out when not null.
template <typename T>
void GlobalBackward(const Shape& s, const double* stats, ScaleOutputGradient<T> dz, const T* scale,
                    T* dy_out, T* dx) {
  const int channels = s.channels;
  gpu::ChannelMap("BatchNorm backward", s.num, s.channels, s.spatial,
                  [=] __device__(int64_t k, int64_t c) {
                    const T dy = scale != nullptr ? MulRn(dz(k), scale[c]) : dz(k);
                    if (dy_out != nullptr) dy_out[k] = dy;
                    dx[k] = MulRn(dy, static_cast<T>(stats[kInvStd * channels + c]));
                  });
}

// Batch statistics: mean(dy) and mean(dy * y) into the statistics; with a fused Scale also the
// Scale's parameter gradients (scale_diff, bias_diff when not null; accumulated), each sum as the
// layer alone takes it.
template <typename T>
void GradientStatistics(const Shape& s, ScaleOutputGradient<T> dz, const T* scale, const T* y,
                        T* scale_diff, T* bias_diff, double* stats) {
  const int64_t m = s.m();
  const int channels = s.channels;
  gpu::ChannelSums<4>(
      "BatchNorm gradient statistics", s.num, s.channels, s.spatial,
      [=] __device__(const gpu::ChannelElement& e, double* v) {
        const T dz_k = dz(e.k);
        const T dy = scale != nullptr ? MulRn(dz_k, scale[e.channel]) : dz_k;
        v[0] = MulRn(static_cast<double>(dz_k), static_cast<double>(y[e.k]));
        v[1] = dz_k;
        v[2] = dy;
        v[3] = MulRn(static_cast<double>(dy), static_cast<double>(y[e.k]));
      },
      [=] __device__(int64_t c, const double* sums) {
        if (scale_diff != nullptr) scale_diff[c] = scale_diff[c] + static_cast<T>(sums[0]);
        if (bias_diff != nullptr) bias_diff[c] = bias_diff[c] + static_cast<T>(sums[1]);
        stats[kMeanDy * channels + c] = sums[2] / m;
        stats[kMeanDyY * channels + c] = sums[3] / m;
      });
}

// A fused Scale's parameter gradients alone (global statistics, or no input gradient wanted);
// the Scale's output gradient is also written to dz_out when not null.
template <typename T>
void ScaleGradients(const Shape& s, ScaleOutputGradient<T> dz, const T* y, T* scale_diff,
                    T* bias_diff, T* dz_out) {
  gpu::ChannelSums<2>(
      "Scale gradient statistics", s.num, s.channels, s.spatial,
      [=] __device__(const gpu::ChannelElement& e, double* v) {
        const T dz_k = dz(e.k);
        if (dz_out != nullptr) dz_out[e.k] = dz_k;
        v[0] = MulRn(static_cast<double>(dz_k), static_cast<double>(y[e.k]));
        v[1] = dz_k;
      },
      [=] __device__(int64_t c, const double* sums) {
        if (scale_diff != nullptr) scale_diff[c] = scale_diff[c] + static_cast<T>(sums[0]);
        if (bias_diff != nullptr) bias_diff[c] = bias_diff[c] + static_cast<T>(sums[1]);
      });
}

// The fused ReLU's input gradient alone.
template <typename T>
void ReLUGradient(const Shape& s, ScaleOutputGradient<T> dz, T* out) {
  gpu::ChannelMap("ReLU backward", s.num, s.channels, s.spatial,
                  [=] __device__(int64_t k, int64_t) { out[k] = dz(k); });
}

// Batch statistics: dx = (dy - mean(dy) - y * mean(dy * y)) * inv_std, dy as in GlobalBackward.
template <typename T>
void BatchBackward(const Shape& s, const double* stats, ScaleOutputGradient<T> dz, const T* scale,
                   const T* y, T* dy_out, T* dx) {
  const int channels = s.channels;
  gpu::ChannelMap("BatchNorm backward", s.num, s.channels, s.spatial,
                  [=] __device__(int64_t k, int64_t c) {
                    const T dy = scale != nullptr ? MulRn(dz(k), scale[c]) : dz(k);
                    if (dy_out != nullptr) dy_out[k] = dy;
                    dx[k] = BatchGradient(dy, y[k], static_cast<T>(stats[kMeanDy * channels + c]),
                                          static_cast<T>(stats[kMeanDyY * channels + c]),
                                          static_cast<T>(stats[kInvStd * channels + c]));
                  });
}

}  // namespace

void BatchNormLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  ran_fused_ = fused_scale_;
  ran_fused_relu_ = scale_relu_;
  ran_fused_slope_ = scale_relu_slope_;
  if (channels_ == 0) return;
  stats_gpu_.Reshape({kStatRows, channels_});
  double* stats = stats_gpu_.mutable_gpu_data<double>();
  const Shape shape{num_, channels_, spatial_dim_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    if (use_global_stats_) {
      GlobalStats<T><<<gpu::Blocks(channels_), gpu::kThreads, 0, gpu::Stream()>>>(
          channels_, blobs_[0]->gpu_data<T>(), blobs_[1]->gpu_data<T>(), blobs_[2]->gpu_data<T>(),
          eps_, stats);
      gpu::CheckLaunch("BatchNorm statistics");
    } else {
      BatchStatistics<T>(shape, x, eps_, static_cast<T>(moving_average_fraction_), stats,
                         blobs_[0]->mutable_gpu_data<T>(), blobs_[1]->mutable_gpu_data<T>(),
                         blobs_[2]->mutable_gpu_data<T>());
    }
    T* x_norm = nullptr;
    if (keeps_x_norm()) {
      x_norm_.ReshapeLike(*bottom[0]);
      x_norm = x_norm_.mutable_gpu_data<T>();
    }
    FusedScale<T> fused;
    if (fused_scale_ != nullptr) {
      // The Scale reads this layer's kept output as its input in a Backward of its own.
      fused_scale_->set_bottom_kept_by(x_norm != nullptr ? &x_norm_ : nullptr);
      const Blob* bias = fused_scale_->bias_blob();
      fused = {fused_scale_->blobs()[0]->gpu_data<T>(),
               bias != nullptr ? bias->gpu_data<T>() : nullptr, scale_relu_,
               static_cast<T>(scale_relu_slope_)};
    }
    Normalize<T>(shape, stats, x, x_norm, top[0]->mutable_gpu_data<T>(), fused);
  });
}

void BatchNormLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  // The statistics get no gradient, whatever param_propagate_down says.
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  double* stats = stats_gpu_.mutable_gpu_data<double>();
  const Shape shape{num_, channels_, spatial_dim_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    // In place, top diff and bottom diff are one buffer: the sums are taken in a kernel of their
    // own before any diff is written.
    const ScaleOutputGradient<T> dy{nullptr, top[0]->gpu_diff<T>(), false, T(0)};
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    if (use_global_stats_) {
      GlobalBackward<T>(shape, stats, dy, nullptr, nullptr, dx);
    } else {
      const T* y = x_norm_.gpu_data<T>();
      GradientStatistics<T>(shape, dy, nullptr, y, nullptr, nullptr, stats);
      BatchBackward<T>(shape, stats, dy, nullptr, y, nullptr, dx);
    }
  });
}

void BatchNormLayer::BackwardFusedGpu(const BlobVec& top, bool propagate_down,
                                      const BlobVec& bottom) {
  ScaleLayer& scale_layer = *ran_fused_;
  double* stats = stats_gpu_.mutable_gpu_data<double>();
  const Shape shape{num_, channels_, spatial_dim_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    // The top's data is the ReLU's output when it was fused (its gradient reads it); its diff
    // the gradient of the group's output.
    const ScaleOutputGradient<T> dz{top[0]->gpu_data<T>(), top[0]->gpu_diff<T>(), ran_fused_relu_,
                                    static_cast<T>(ran_fused_slope_)};
    const T* y = x_norm_.gpu_data<T>();
    const T* scale = scale_layer.blobs()[0]->gpu_data<T>();
    T* scale_diff = scale_layer.param_propagate_down(0)
                        ? scale_layer.blobs()[0]->mutable_gpu_diff<T>()
                        : nullptr;
    T* bias_diff =
        scale_layer.bias_diff_wanted() ? scale_layer.bias_blob()->mutable_gpu_diff<T>() : nullptr;
    // The top's diff ends as the layers one by one leave it: the bottom's gradient in place;
    // else the Scale's input gradient when it passes one down, else the ReLU's input gradient.
    T* top_diff = top[0]->mutable_gpu_diff<T>();
    T* scale_input_diff = propagate_down && top[0] != bottom[0] ? top_diff : nullptr;
    T* relu_input_diff = !propagate_down && ran_fused_relu_ ? top_diff : nullptr;
    if (!use_global_stats_ && propagate_down) {
      GradientStatistics<T>(shape, dz, scale, y, scale_diff, bias_diff, stats);
      BatchBackward<T>(shape, stats, dz, scale, y, scale_input_diff,
                       bottom[0]->mutable_gpu_diff<T>());
    } else {
      if (scale_diff != nullptr || bias_diff != nullptr)
        ScaleGradients<T>(shape, dz, y, scale_diff, bias_diff, relu_input_diff);
      else if (relu_input_diff != nullptr)
        ReLUGradient<T>(shape, dz, relu_input_diff);
      if (propagate_down)
        GlobalBackward<T>(shape, stats, dz, scale, scale_input_diff,
                          bottom[0]->mutable_gpu_diff<T>());
    }
  });
}

}  // namespace crema
