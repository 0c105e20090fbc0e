#include "layers/bias/bias_layer.hpp"

#include <memory>

#include "core/filler.hpp"
#include "crema/layer_registry.hpp"

namespace crema {

void BiasLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const BiasParameter& param = layer_param_.bias_param();
  if (bottom.size() > 1) {
    CREMA_CHECK_PARAM(blobs_.empty(), "blobs",
                      "must be empty when the bias comes from bottom[1], got ", blobs_.size(),
                      " blobs");
    return;
  }
  if (!blobs_.empty()) {
    // The bias came with the parameter (a .caffemodel); Reshape checks its shape.
    CREMA_CHECK_PARAM(blobs_.size() == 1, "blobs", "must hold 1 blob (the bias), got ",
                      blobs_.size());
    ConvertLoadedBlobs();
  } else {
    const int num_axes = bottom[0]->num_axes();
    const int axis = param.axis();
    CREMA_CHECK_PARAM(axis >= -num_axes && axis < num_axes, "bias_param.axis", "must be in [",
                      -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", axis);
    const int start = bottom[0]->CanonicalAxisIndex(axis);
    CREMA_CHECK_PARAM(param.num_axes() >= -1, "bias_param.num_axes",
                      "must be >= 0, or -1 for all axes from bias_param.axis, got ",
                      param.num_axes());
    const int end = param.num_axes() == -1 ? num_axes : start + param.num_axes();
    CREMA_CHECK_PARAM(end <= num_axes, "bias_param.num_axes", "(", param.num_axes(), ") from axis ",
                      start, " extends past the ", num_axes, " axes of bottom ",
                      bottom[0]->shape_string());
    const std::vector<int> shape(bottom[0]->shape().begin() + start,
                                 bottom[0]->shape().begin() + end);
    blobs_.push_back(std::make_shared<Blob>(shape, dtype()));
    FillerParameter filler;
    filler.set_type("constant");
    filler.set_value(0);
    FillBlob(param.has_filler() ? param.filler() : filler, blobs_[0].get(),
             ErrorPrefix("bias_param.filler") + "bias_param.filler: ");
  }
  param_propagate_down_.assign(blobs_.size(), true);
}

void BiasLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& bias = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  const int num_axes = bottom[0]->num_axes();
  int axis = 0;
  if (bias.num_axes() > 0) {
    const int given = layer_param_.bias_param().axis();
    CREMA_CHECK_PARAM(given >= -num_axes && given < num_axes, "bias_param.axis", "must be in [",
                      -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", given);
    axis = bottom[0]->CanonicalAxisIndex(given);
  }
  const char* what = bottom.size() > 1 ? "bottom[1]" : "the learned bias";
  CREMA_CHECK_SHAPE(axis + bias.num_axes() <= num_axes, what, " ", bias.shape_string(),
                    " from axis ", axis, " extends past bottom[0] ", bottom[0]->shape_string());
  for (int i = 0; i < bias.num_axes(); ++i)
    CREMA_CHECK_SHAPE(bottom[0]->shape(axis + i) == bias.shape(i), what, " ", bias.shape_string(),
                      " does not match bottom[0] ", bottom[0]->shape_string(), " at axes ", axis,
                      " on (bias_param.axis)");
  if (bottom.size() > 1) CREMA_CHECK_SHAPE(top[0] != bottom[1], "top may not be bottom[1]");
  outer_dim_ = bottom[0]->count(0, axis);
  bias_dim_ = bias.count();
  inner_dim_ = bottom[0]->count(axis + bias.num_axes());
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

template <typename T>
void BiasLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* bias = (bottom.size() > 1 ? bottom[1] : blobs_[0].get())->cpu_data<T>();
  const T* bottom_data = bottom[0]->cpu_data<T>();
  T* top_data = top[0]->mutable_cpu_data<T>();
  for (int64_t o = 0; o < outer_dim_; ++o)
    for (int64_t d = 0; d < bias_dim_; ++d) {
      const int64_t offset = (o * bias_dim_ + d) * inner_dim_;
      for (int64_t i = 0; i < inner_dim_; ++i)
        top_data[offset + i] = bottom_data[offset + i] + bias[d];
    }
}

template <typename T>
void BiasLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                          const BlobVec& bottom) {
  const T* top_diff = top[0]->cpu_diff<T>();
  const bool learned = bottom.size() == 1;
  if (learned ? param_propagate_down(0) : propagate_down[1]) {
    T* bias_diff = (learned ? blobs_[0].get() : bottom[1])->mutable_cpu_diff<T>();
    for (int64_t d = 0; d < bias_dim_; ++d) {
      T sum = 0;
      for (int64_t o = 0; o < outer_dim_; ++o) {
        const T* row = top_diff + (o * bias_dim_ + d) * inner_dim_;
        for (int64_t i = 0; i < inner_dim_; ++i) sum += row[i];
      }
      // A learned bias accumulates (the solver clears it); bottom[1]'s diff is written.
      bias_diff[d] = learned ? bias_diff[d] + sum : sum;
    }
  }
  if (propagate_down[0] && top[0] != bottom[0]) {
    const int64_t count = top[0]->count();
    T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
    for (int64_t i = 0; i < count; ++i) bottom_diff[i] = top_diff[i];
  }
}

void BiasLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top));
}

void BiasLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Bias, BiasLayer);

}  // namespace crema
