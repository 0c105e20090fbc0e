#include "layers/slice/slice_layer.hpp"

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void SliceLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const SliceParameter& param = layer_param_.slice_param();
  CREMA_CHECK_PARAM(!(param.has_axis() && param.has_slice_dim()), "slice_param.slice_dim",
                    "is a legacy alias of slice_param.axis; give one or the other, not both");
}

void SliceLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    CREMA_CHECK_SHAPE(t != bottom[0], "Slice does not allow in-place computation");
  const SliceParameter& param = layer_param_.slice_param();
  const int num_axes = bottom[0]->num_axes();
  if (param.has_slice_dim()) {
    CREMA_CHECK_PARAM(param.slice_dim() < static_cast<uint32_t>(num_axes), "slice_param.slice_dim",
                      "must be in [0, ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", param.slice_dim());
    slice_axis_ = static_cast<int>(param.slice_dim());
  } else {
    CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "slice_param.axis",
                      "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                      bottom[0]->shape_string(), ", got ", param.axis());
    slice_axis_ = bottom[0]->CanonicalAxisIndex(param.axis());
  }
  std::vector<int> top_shape = bottom[0]->shape();
  const int axis_size = bottom[0]->shape(slice_axis_);
  num_slices_ = bottom[0]->count(0, slice_axis_);
  slice_size_ = bottom[0]->count(slice_axis_ + 1);
  const int num_tops = static_cast<int>(top.size());
  if (param.slice_point_size() > 0) {
    CREMA_CHECK_PARAM(param.slice_point_size() == num_tops - 1, "slice_param.slice_point",
                      "must be given once per top minus one (", num_tops - 1, " for ", num_tops,
                      " tops), got ", param.slice_point_size(), " values");
    CREMA_CHECK_SHAPE(num_tops <= axis_size, "has ", num_tops, " tops, more than the size ",
                      axis_size, " of the slice axis ", slice_axis_, " (bottom ",
                      bottom[0]->shape_string(), ")");
    uint32_t previous = 0;
    for (int t = 0; t < num_tops; ++t) {
      const uint32_t point = t + 1 < num_tops ? param.slice_point(t) : axis_size;
      if (t + 1 < num_tops) {
        CREMA_CHECK_PARAM(point > previous, "slice_param.slice_point",
                          "must be strictly increasing and > 0, got ", point, " after ", previous);
        CREMA_CHECK_PARAM(point <= static_cast<uint32_t>(axis_size), "slice_param.slice_point",
                          "must not exceed the size ", axis_size, " of the slice axis ",
                          slice_axis_, " (bottom ", bottom[0]->shape_string(), "), got ", point);
      }
      top_shape[slice_axis_] = static_cast<int>(point - previous);
      top[t]->Reshape(top_shape);
      previous = point;
    }
  } else {
    CREMA_CHECK_SHAPE(axis_size % num_tops == 0, "the number of tops (", num_tops,
                      ") must divide the size ", axis_size, " of the slice axis ", slice_axis_,
                      " (bottom ", bottom[0]->shape_string(), ") when no slice_point is given");
    top_shape[slice_axis_] = axis_size / num_tops;
    for (Blob* t : top) t->Reshape(top_shape);
  }
  if (num_tops == 1) {
    top[0]->ShareData(*bottom[0]);
    top[0]->ShareDiff(*bottom[0]);
  }
}

template <typename T>
void SliceLayer::Forward(const Blob& bottom, const BlobVec& top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  const int64_t bottom_axis = bottom.shape(slice_axis_);
  int64_t offset = 0;
  for (Blob* t : top) {
    T* top_data = t->mutable_cpu_data<T>();
    const int64_t top_axis = t->shape(slice_axis_);
    const int64_t slab = top_axis * slice_size_;
    for (int64_t n = 0; n < num_slices_; ++n)
      cpu::Copy<T>(slab, bottom_data + (n * bottom_axis + offset) * slice_size_,
                   top_data + n * slab);
    offset += top_axis;
  }
}

template <typename T>
void SliceLayer::Backward(const BlobVec& top, Blob* bottom) const {
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t bottom_axis = bottom->shape(slice_axis_);
  int64_t offset = 0;
  for (Blob* t : top) {
    const T* top_diff = t->cpu_diff<T>();
    const int64_t top_axis = t->shape(slice_axis_);
    const int64_t slab = top_axis * slice_size_;
    for (int64_t n = 0; n < num_slices_; ++n)
      cpu::Copy<T>(slab, top_diff + n * slab,
                   bottom_diff + (n * bottom_axis + offset) * slice_size_);
    offset += top_axis;
  }
}

void SliceLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() == 1) return;  // shared
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top));
}

void SliceLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0] || top.size() == 1) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom[0]));
}

CREMA_REGISTER_LAYER(Slice, SliceLayer);

}  // namespace crema
