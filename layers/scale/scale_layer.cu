#include "layers/scale/scale_layer.hpp"
#include "math/channel_gpu.cuh"

namespace crema {
namespace {

// (outer, dim, inner): the axes of bottom[0] before, along and after the scale (or the bias).
struct Dims {
  int64_t outer, dim, inner;
  bool operator==(const Dims& o) const {
    return outer == o.outer && dim == o.dim && inner == o.inner;
  }
};

// y = x * scale (+ bias when not null) and a fused ReLU when relu, the same operations as the
// CPU (no fused multiply-add) and as a BatchNorm fused with the layer.
template <typename T>
void ScaleForward(const Dims& d, const T* x, const T* scale, const T* bias, bool relu, T slope,
                  T* y) {
  gpu::ChannelMap("Scale forward", d.outer, d.dim, d.inner, [=] __device__(int64_t k, int64_t c) {
    T value = gpu::MulRn(x[k], scale[c]);
    if (bias != nullptr) value = gpu::AddRn(value, bias[c]);
    y[k] = relu ? gpu::ReLUForwardValue(value, slope) : value;
  });
}

// y += bias (indexed by its own dims), then a fused ReLU when relu.
template <typename T>
void AddBias(const Dims& d, const T* bias, bool relu, T slope, T* y) {
  gpu::ChannelMap("Scale bias", d.outer, d.dim, d.inner, [=] __device__(int64_t k, int64_t c) {
    const T value = gpu::AddRn(y[k], bias[c]);
    y[k] = relu ? gpu::ReLUForwardValue(value, slope) : value;
  });
}

// Both per-channel sums of a scale and a bias lined up with it in one pass (each with the bits
// of its own reduction, gpu::ReduceByAxis): scale_diff (+)= sum dy * x, bias_diff += sum dy.
template <typename T>
void ScaleAndBiasGradients(const Dims& d, const T* dy, const T* x, bool accumulate, T* scale_diff,
                           T* bias_diff) {
  gpu::ChannelSums<2>(
      "Scale backward", d.outer, d.dim, d.inner,
      [=] __device__(const gpu::ChannelElement& e, double* v) {
        v[0] = gpu::MulRn(static_cast<double>(dy[e.k]), static_cast<double>(x[e.k]));
        v[1] = dy[e.k];
      },
      [=] __device__(int64_t c, const double* sums) {
        scale_diff[c] =
            accumulate ? scale_diff[c] + static_cast<T>(sums[0]) : static_cast<T>(sums[0]);
        bias_diff[c] = bias_diff[c] + static_cast<T>(sums[1]);
      });
}

// dx = dy * scale.
template <typename T>
void ScaleBackward(const Dims& d, const T* dy, const T* scale, T* dx) {
  gpu::ChannelMap("Scale backward", d.outer, d.dim, d.inner,
                  [=] __device__(int64_t k, int64_t c) { dx[k] = gpu::MulRn(dy[k], scale[c]); });
}

}  // namespace

void ScaleLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const Dims dims{outer_dim_, scale_dim_, inner_dim_};
  const Dims bias_dims{bias_outer_dim_, bias_dim_, bias_inner_dim_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* scale = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->gpu_data<T>();
    const T* x = bottom[0]->gpu_data<T>();
    // In place, keep the bottom for the gradient of the scale (unless a BatchNorm keeps it).
    if (top[0] == bottom[0] && !forward_only() && kept_bottom_ == nullptr)
      gpu::Copy<T>(bottom[0]->count(), x, bottom_copy_.mutable_gpu_data<T>());
    T* y = top[0]->mutable_gpu_data<T>();
    const T* bias = bias_term_ ? blobs_[bias_param_id_]->gpu_data<T>() : nullptr;
    // The bias lined up with the scale (a per-channel Scale): one pass with the ReLU.
    const bool aligned = bias != nullptr && bias_dims == dims;
    const T slope = static_cast<T>(fused_relu_slope());
    ScaleForward<T>(dims, x, scale, aligned ? bias : nullptr,
                    fused_relu() && (bias == nullptr || aligned), slope, y);
    if (bias != nullptr && !aligned) AddBias<T>(bias_dims, bias, fused_relu(), slope, y);
  });
}

void ScaleLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  const Dims dims{outer_dim_, scale_dim_, inner_dim_};
  const Dims bias_dims{bias_outer_dim_, bias_dim_, bias_inner_dim_};
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    const bool learned = bottom.size() == 1;
    const bool bias_down = bias_term_ && param_propagate_down(bias_param_id_);
    const bool scale_down = learned ? param_propagate_down(0) : propagate_down[1];
    // In place, the top diff is the bottom diff: the scale and bias diffs are taken first (the
    // stream orders the kernels). A learned scale accumulates (the solver clears it);
    // bottom[1]'s diff is written.
    const T* x = scale_down ? BottomValue(bottom, top)->gpu_data<T>() : nullptr;
    T* scale_diff =
        scale_down ? (learned ? blobs_[0].get() : bottom[1])->mutable_gpu_diff<T>() : nullptr;
    T* bias_diff = bias_down ? blobs_[bias_param_id_]->mutable_gpu_diff<T>() : nullptr;
    if (scale_down && bias_down && bias_dims == dims) {
      ScaleAndBiasGradients<T>(dims, top_diff, x, learned, scale_diff, bias_diff);
    } else {
      if (bias_down)
        gpu::ReduceByAxis<T>(bias_outer_dim_, bias_dim_, bias_inner_dim_, top_diff, nullptr, true,
                             bias_diff);
      if (scale_down)
        gpu::ReduceByAxis<T>(outer_dim_, scale_dim_, inner_dim_, top_diff, x, learned, scale_diff);
    }
    if (propagate_down[0]) {
      const T* scale = (learned ? blobs_[0].get() : bottom[1])->gpu_data<T>();
      ScaleBackward<T>(dims, top_diff, scale, bottom[0]->mutable_gpu_diff<T>());
    }
  });
}

}  // namespace crema
