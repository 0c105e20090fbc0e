#include "layers/flatten/flatten_layer.hpp"

#include <cstdint>

#include "crema/layer_registry.hpp"

namespace crema {

void FlattenLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Flatten does not allow in-place computation");
  const FlattenParameter& param = layer_param_.flatten_param();
  const int num_axes = bottom[0]->num_axes();
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "flatten_param.axis",
                    "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                    bottom[0]->shape_string(), ", got ", param.axis());
  CREMA_CHECK_PARAM(param.end_axis() >= -num_axes && param.end_axis() < num_axes,
                    "flatten_param.end_axis", "must be in [", -num_axes, ", ", num_axes,
                    ") for a bottom of shape ", bottom[0]->shape_string(), ", got ",
                    param.end_axis());
  const int start_axis = bottom[0]->CanonicalAxisIndex(param.axis());
  const int end_axis = bottom[0]->CanonicalAxisIndex(param.end_axis());
  // As Caffe, end_axis == axis - 1 is allowed and inserts an axis of size 1.
  CREMA_CHECK_PARAM(end_axis + 1 >= start_axis, "flatten_param.end_axis",
                    "must not come before axis - 1; axis is ", start_axis, ", end_axis ", end_axis,
                    " (after counting negative values from the end)");
  std::vector<int> top_shape;
  for (int i = 0; i < start_axis; ++i) top_shape.push_back(bottom[0]->shape(i));
  const int64_t flat = bottom[0]->count(start_axis, end_axis + 1);
  CREMA_CHECK_SHAPE(flat <= INT32_MAX, "flattened axis too large: ", flat);
  top_shape.push_back(static_cast<int>(flat));
  for (int i = end_axis + 1; i < num_axes; ++i) top_shape.push_back(bottom[0]->shape(i));
  top[0]->Reshape(top_shape);
  CREMA_ASSERT(top[0]->count() == bottom[0]->count(), top[0]->shape_string(), " vs ",
               bottom[0]->shape_string());
}

void FlattenLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ShareData(*bottom[0]);
}

void FlattenLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (propagate_down[0]) bottom[0]->ShareDiff(*top[0]);
}

CREMA_REGISTER_LAYER(Flatten, FlattenLayer);

}  // namespace crema
