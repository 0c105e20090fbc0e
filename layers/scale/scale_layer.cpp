#include "layers/scale/scale_layer.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/filler.hpp"
#include "crema/layer_registry.hpp"
#include "math/activation.hpp"
#include "math/channel_loops.hpp"

namespace crema {

void ScaleLayer::AddLearnedBlob(const Blob& bottom, const FillerParameter& filler,
                                const char* filler_field) {
  const ScaleParameter& param = layer_param_.scale_param();
  const int num_axes = bottom.num_axes();
  const int axis = param.axis();
  CREMA_CHECK_PARAM(axis >= -num_axes && axis < num_axes, "scale_param.axis", "must be in [",
                    -num_axes, ", ", num_axes, ") for a bottom of shape ", bottom.shape_string(),
                    ", got ", axis);
  const int start = bottom.CanonicalAxisIndex(axis);
  CREMA_CHECK_PARAM(param.num_axes() >= -1, "scale_param.num_axes",
                    "must be >= 0, or -1 for all axes from scale_param.axis, got ",
                    param.num_axes());
  const int end = param.num_axes() == -1 ? num_axes : start + param.num_axes();
  CREMA_CHECK_PARAM(end <= num_axes, "scale_param.num_axes", "(", param.num_axes(), ") from axis ",
                    start, " extends past the ", num_axes, " axes of bottom ",
                    bottom.shape_string());
  const std::vector<int> shape(bottom.shape().begin() + start, bottom.shape().begin() + end);
  blobs_.push_back(std::make_shared<Blob>(shape, dtype()));
  FillBlob(filler, blobs_.back().get(), ErrorPrefix(filler_field) + filler_field + ": ");
}

void ScaleLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ScaleParameter& param = layer_param_.scale_param();
  bias_term_ = param.bias_term();
  const size_t expected = (bottom.size() == 1 ? 1 : 0) + (bias_term_ ? 1 : 0);
  if (!blobs_.empty()) {
    // Blobs came with the parameter (a .caffemodel); Reshape checks their shapes.
    CREMA_CHECK_PARAM(blobs_.size() == expected, "blobs", "must hold ", expected, " blob",
                      expected == 1 ? "" : "s", " (",
                      bottom.size() == 1 ? (bias_term_ ? "scale and bias" : "the scale")
                                         : (bias_term_ ? "the bias"
                                                       : "none: the scale is "
                                                         "bottom[1]"),
                      "), got ", blobs_.size());
    ConvertLoadedBlobs();
  } else {
    FillerParameter one, zero;
    one.set_type("constant");
    one.set_value(1);
    zero.set_type("constant");
    zero.set_value(0);
    if (bottom.size() == 1)
      AddLearnedBlob(*bottom[0], param.has_filler() ? param.filler() : one, "scale_param.filler");
    if (bias_term_)
      AddLearnedBlob(*bottom[0], param.has_bias_filler() ? param.bias_filler() : zero,
                     "scale_param.bias_filler");
  }
  bias_param_id_ = bias_term_ ? static_cast<int>(blobs_.size()) - 1 : -1;
  learned_scale_ = bottom.size() == 1;
  param_propagate_down_.assign(blobs_.size(), true);
  bottom_copy_.set_dtype(dtype());
}

int ScaleLayer::BroadcastAxis(const Blob& bottom, const Blob& blob, const char* what) {
  const int num_axes = bottom.num_axes();
  int axis = 0;
  if (blob.num_axes() > 0) {
    const int given = layer_param_.scale_param().axis();
    CREMA_CHECK_PARAM(given >= -num_axes && given < num_axes, "scale_param.axis", "must be in [",
                      -num_axes, ", ", num_axes, ") for a bottom of shape ", bottom.shape_string(),
                      ", got ", given);
    axis = bottom.CanonicalAxisIndex(given);
  }
  CREMA_CHECK_SHAPE(axis + blob.num_axes() <= num_axes, what, " ", blob.shape_string(),
                    " from axis ", axis, " extends past bottom[0] ", bottom.shape_string());
  for (int i = 0; i < blob.num_axes(); ++i)
    CREMA_CHECK_SHAPE(bottom.shape(axis + i) == blob.shape(i), what, " ", blob.shape_string(),
                      " does not match bottom[0] ", bottom.shape_string(), " at axes ", axis,
                      " on (scale_param.axis)");
  return axis;
}

void ScaleLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& scale = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  const int axis =
      BroadcastAxis(*bottom[0], scale, bottom.size() > 1 ? "bottom[1]" : "the learned scale");
  if (bottom.size() > 1) CREMA_CHECK_SHAPE(top[0] != bottom[1], "top may not be bottom[1]");
  axis_ = axis;
  outer_dim_ = bottom[0]->count(0, axis);
  scale_dim_ = scale.count();
  inner_dim_ = bottom[0]->count(axis + scale.num_axes());
  if (bias_term_) {
    const Blob& bias = *blobs_[bias_param_id_];
    const int bias_axis = BroadcastAxis(*bottom[0], bias, "the learned bias");
    bias_outer_dim_ = bottom[0]->count(0, bias_axis);
    bias_dim_ = bias.count();
    bias_inner_dim_ = bottom[0]->count(bias_axis + bias.num_axes());
  }
  if (top[0] == bottom[0])
    bottom_copy_.ReshapeLike(*bottom[0]);
  else
    top[0]->ReshapeLike(*bottom[0]);
}

bool ScaleLayer::IsPerChannel() const {
  const bool bias_aligned =
      !bias_term_ ||
      (bias_outer_dim_ == outer_dim_ && bias_dim_ == scale_dim_ && bias_inner_dim_ == inner_dim_);
  return learned_scale_ && axis_ == 1 && blobs_[0]->num_axes() == 1 && bias_aligned;
}

const Blob* ScaleLayer::BottomValue(const BlobVec& bottom, const BlobVec& top) const {
  if (kept_bottom_ != nullptr) return kept_bottom_;
  return top[0] == bottom[0] ? &bottom_copy_ : bottom[0];
}

template <typename T>
void ScaleLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* scale = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->cpu_data<T>();
  const T* bottom_data = bottom[0]->cpu_data<T>();
  if (top[0] == bottom[0] && !forward_only() && kept_bottom_ == nullptr) {
    T* copy = bottom_copy_.mutable_cpu_data<T>();
    cpu::ForEachChannelPlane(outer_dim_, scale_dim_, inner_dim_, [&](int64_t, int64_t offset) {
      std::copy(bottom_data + offset, bottom_data + offset + inner_dim_, copy + offset);
    });
  }
  T* top_data = top[0]->mutable_cpu_data<T>();
  const T* bias = bias_term_ ? blobs_[bias_param_id_]->cpu_data<T>() : nullptr;
  // The bias indexed like the scale (the usual case, a per-channel Scale): one pass computes
  // x * scale + bias (and a fused ReLU), the same operations in the same order as two passes.
  const bool bias_aligned = bias != nullptr && bias_outer_dim_ == outer_dim_ &&
                            bias_dim_ == scale_dim_ && bias_inner_dim_ == inner_dim_;
  const T slope = static_cast<T>(fused_relu_slope());
  const bool relu_in_pass = fused_relu() && (bias == nullptr || bias_aligned);
  cpu::ForEachChannelPlane(outer_dim_, scale_dim_, inner_dim_, [&](int64_t d, int64_t offset) {
    const T* x = bottom_data + offset;
    T* y = top_data + offset;
    if (bias_aligned) {
      const T b = bias[d];
      for (int64_t i = 0; i < inner_dim_; ++i) y[i] = x[i] * scale[d] + b;
    } else {
      for (int64_t i = 0; i < inner_dim_; ++i) y[i] = x[i] * scale[d];
    }
    if (relu_in_pass)
      for (int64_t i = 0; i < inner_dim_; ++i) y[i] = ReLUValue(y[i], slope);
  });
  if (bias == nullptr || bias_aligned) return;
  cpu::ForEachChannelPlane(bias_outer_dim_, bias_dim_, bias_inner_dim_,
                           [&](int64_t d, int64_t offset) {
                             T* row = top_data + offset;
                             for (int64_t i = 0; i < bias_inner_dim_; ++i) row[i] += bias[d];
                             if (fused_relu())
                               for (int64_t i = 0; i < bias_inner_dim_; ++i)
                                 row[i] = ReLUValue(row[i], slope);
                           });
}

template <typename T>
void ScaleLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const T* top_diff = top[0]->cpu_diff<T>();
  // In place, the top diff is the bottom diff: the scale and bias diffs are read off it first.
  if (bias_term_ && param_propagate_down(bias_param_id_)) {
    T* bias_diff = blobs_[bias_param_id_]->mutable_cpu_diff<T>();
    std::vector<T> sums(bias_dim_);
    cpu::ChannelSums<T>(
        bias_outer_dim_, bias_dim_, bias_inner_dim_,
        [top_diff](int64_t, int64_t k) { return top_diff[k]; }, sums.data());
    for (int64_t d = 0; d < bias_dim_; ++d) bias_diff[d] += sums[d];
  }
  const bool learned = bottom.size() == 1;
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    const T* bottom_data = BottomValue(bottom, top)->cpu_data<T>();
    T* scale_diff = (learned ? blobs_[0].get() : bottom[1])->mutable_cpu_diff<T>();
    std::vector<T> sums(scale_dim_);
    cpu::ChannelSums<T>(
        outer_dim_, scale_dim_, inner_dim_,
        [top_diff, bottom_data](int64_t, int64_t k) { return top_diff[k] * bottom_data[k]; },
        sums.data());
    // A learned scale accumulates (the solver clears it); bottom[1]'s diff is written.
    for (int64_t d = 0; d < scale_dim_; ++d)
      scale_diff[d] = learned ? scale_diff[d] + sums[d] : sums[d];
  }
  if (propagate_down[0]) {
    const T* scale = (learned ? blobs_[0].get() : bottom[1])->cpu_data<T>();
    T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
    cpu::ForEachChannelPlane(outer_dim_, scale_dim_, inner_dim_, [&](int64_t d, int64_t offset) {
      for (int64_t i = 0; i < inner_dim_; ++i)
        bottom_diff[offset + i] = top_diff[offset + i] * scale[d];
    });
  }
}

void ScaleLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
}

void ScaleLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Scale, ScaleLayer);

}  // namespace crema
