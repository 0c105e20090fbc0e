#include "layers/concat/concat_layer.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "crema/layer_registry.hpp"
#include "math/activation.hpp"
#include "math/math.hpp"

namespace crema {
namespace {

template <typename T>
struct SlabCopy {
  const T* from;
  T* to;
  int64_t count;
  // Backward with a bottom's ReLU fused (Layer::set_fused_relu_backward): that bottom's slab of
  // data, else null, and the ReLU's negative slope.
  const T* relu_y = nullptr;
  T relu_slope = 0;
};

// The slabs of a concatenation, several at a time on the CPU's threads (a slab per image and
// bottom: too short alone to be worth splitting).
template <typename T>
void CopySlabs(const std::vector<SlabCopy<T>>& copies) {
  int64_t total = 0;
  for (const SlabCopy<T>& c : copies) total += c.count;
  const int64_t n = static_cast<int64_t>(copies.size());
#pragma omp parallel for schedule(dynamic) if (n > 1 && total > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const SlabCopy<T>& c = copies[i];
    if (c.relu_y != nullptr)
      ReLUGradientSerial(c.count, c.relu_y, c.from, c.relu_slope, c.to);
    else
      cpu::Copy<T>(c.count, c.from, c.to);
  }
}

}  // namespace

void ConcatLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ConcatParameter& param = layer_param_.concat_param();
  CREMA_CHECK_PARAM(!(param.has_axis() && param.has_concat_dim()), "concat_param.concat_dim",
                    "is a legacy alias of concat_param.axis; give one or the other, not both");
}

void ConcatLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* b : bottom)
    CREMA_CHECK_SHAPE(b != top[0], "Concat does not allow in-place computation");
  const ConcatParameter& param = layer_param_.concat_param();
  const int num_axes = bottom[0]->num_axes();
  if (param.has_concat_dim()) {
    CREMA_CHECK_PARAM(param.concat_dim() < static_cast<uint32_t>(num_axes),
                      "concat_param.concat_dim", "must be in [0, ", num_axes,
                      ") for a bottom of shape ", bottom[0]->shape_string(), ", got ",
                      param.concat_dim());
    concat_axis_ = static_cast<int>(param.concat_dim());
  } else {
    CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "concat_param.axis",
                      "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", param.axis());
    concat_axis_ = bottom[0]->CanonicalAxisIndex(param.axis());
  }
  std::vector<int> top_shape = bottom[0]->shape();
  num_concats_ = bottom[0]->count(0, concat_axis_);
  concat_input_size_ = bottom[0]->count(concat_axis_ + 1);
  for (size_t i = 1; i < bottom.size(); ++i) {
    CREMA_CHECK_SHAPE(bottom[i]->num_axes() == num_axes, "all bottoms must have the same number ",
                      "of axes: bottom 0 is ", bottom[0]->shape_string(), ", bottom ", i, " is ",
                      bottom[i]->shape_string());
    for (int j = 0; j < num_axes; ++j) {
      if (j == concat_axis_) continue;
      CREMA_CHECK_SHAPE(bottom[i]->shape(j) == top_shape[j], "all bottoms must have the same ",
                        "shape except on the concat axis ", concat_axis_, ": bottom 0 is ",
                        bottom[0]->shape_string(), ", bottom ", i, " is ",
                        bottom[i]->shape_string());
    }
    top_shape[concat_axis_] += bottom[i]->shape(concat_axis_);
  }
  top[0]->Reshape(top_shape);
  if (bottom.size() == 1) {
    top[0]->ShareData(*bottom[0]);
    top[0]->ShareDiff(*bottom[0]);
  }
}

template <typename T>
void ConcatLayer::Forward(const BlobVec& bottom, Blob* top) const {
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t top_axis = top->shape(concat_axis_);
  std::vector<SlabCopy<T>> copies;
  int64_t offset = 0;
  for (Blob* b : bottom) {
    const T* bottom_data = b->cpu_data<T>();
    const int64_t slab = b->shape(concat_axis_) * concat_input_size_;
    for (int64_t n = 0; n < num_concats_; ++n)
      copies.push_back(
          {bottom_data + n * slab, top_data + (n * top_axis + offset) * concat_input_size_, slab});
    offset += b->shape(concat_axis_);
  }
  CopySlabs(copies);
}

template <typename T>
void ConcatLayer::Backward(const Blob& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom, const std::vector<float>& relu_slopes) const {
  const T* top_diff = top.cpu_diff<T>();
  const int64_t top_axis = top.shape(concat_axis_);
  std::vector<SlabCopy<T>> copies;
  int64_t offset = 0;
  for (size_t i = 0; i < bottom.size(); ++i) {
    const int64_t bottom_axis = bottom[i]->shape(concat_axis_);
    if (propagate_down[i]) {
      T* bottom_diff = bottom[i]->mutable_cpu_diff<T>();
      const bool relu = !std::isnan(relu_slopes[i]);
      const T* relu_y = relu ? bottom[i]->cpu_data<T>() : nullptr;
      const int64_t slab = bottom_axis * concat_input_size_;
      for (int64_t n = 0; n < num_concats_; ++n)
        copies.push_back({top_diff + (n * top_axis + offset) * concat_input_size_,
                          bottom_diff + n * slab, slab, relu ? relu_y + n * slab : nullptr,
                          static_cast<T>(relu ? relu_slopes[i] : 0.f)});
    }
    offset += bottom_axis;
  }
  CopySlabs(copies);
}

void ConcatLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;  // shared
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, Forward<T>(bottom, top[0]));
}

void ConcatLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (bottom.size() == 1) return;  // shared
  // The ReLUs the net fused into this Backward (NaN: none), applied slab by slab as copied.
  std::vector<float> relu_slopes(bottom.size(), std::nanf(""));
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) TakeFusedReLUBackward(static_cast<int>(i), &relu_slopes[i]);
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T,
                       Backward<T>(*top[0], propagate_down, bottom, relu_slopes));
}

CREMA_REGISTER_LAYER(Concat, ConcatLayer);

}  // namespace crema
