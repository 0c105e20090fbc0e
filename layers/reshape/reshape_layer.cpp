#include "layers/reshape/reshape_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void ReshapeLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Reshape does not allow in-place computation");
  const BlobShape& shape = layer_param_.reshape_param().shape();
  copy_axes_.clear();
  inferred_axis_ = -1;
  constant_count_ = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const int64_t dim = shape.dim(i);
    if (dim == 0) {
      copy_axes_.push_back(i);
    } else if (dim == -1) {
      CREMA_CHECK_PARAM(inferred_axis_ == -1, "reshape_param.shape",
                        "may contain at most one -1 (inferred) dim; dims ", inferred_axis_, " and ",
                        i, " are both -1");
      inferred_axis_ = i;
    } else {
      CREMA_CHECK_PARAM(dim > 0 && dim <= INT32_MAX, "reshape_param.shape",
                        "dims must be > 0, 0 (copy) or -1 (infer), got ", dim, " at dim ", i);
      constant_count_ *= dim;
    }
  }
}

void ReshapeLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const ReshapeParameter& param = layer_param_.reshape_param();
  const Blob& in = *bottom[0];
  const int bottom_axes = in.num_axes();
  const int axis = param.axis();
  const int start_axis = axis >= 0 ? axis : bottom_axes + axis + 1;
  CREMA_CHECK_PARAM(start_axis >= 0 && start_axis <= bottom_axes, "reshape_param.axis",
                    "must be in [", -bottom_axes - 1, ", ", bottom_axes, "] for a bottom of shape ",
                    in.shape_string(), ", got ", axis);
  const int num_axes = param.num_axes();
  CREMA_CHECK_PARAM(num_axes >= -1, "reshape_param.num_axes", "must be >= 0, or -1 for all, got ",
                    num_axes);
  const int end_axis = num_axes == -1 ? bottom_axes : start_axis + num_axes;
  CREMA_CHECK_PARAM(end_axis <= bottom_axes, "reshape_param.num_axes",
                    "axis + num_axes = ", end_axis, " is beyond the ", bottom_axes,
                    " axes of the bottom ", in.shape_string());
  const BlobShape& shape = param.shape();
  std::vector<int> top_shape(in.shape().begin(), in.shape().begin() + start_axis);
  for (int i = 0; i < shape.dim_size(); ++i) top_shape.push_back(static_cast<int>(shape.dim(i)));
  top_shape.insert(top_shape.end(), in.shape().begin() + end_axis, in.shape().end());
  for (int i : copy_axes_) {
    CREMA_CHECK_PARAM(start_axis + i < bottom_axes, "reshape_param.shape", "dim ", i,
                      " is 0 (copy), but the bottom ", in.shape_string(), " has no axis ",
                      start_axis + i, " to copy");
    top_shape[start_axis + i] = in.shape(start_axis + i);
  }
  if (inferred_axis_ >= 0) {
    int64_t explicit_count = constant_count_ * in.count(0, start_axis) * in.count(end_axis);
    for (int i : copy_axes_) explicit_count *= in.shape(start_axis + i);
    CREMA_CHECK_SHAPE(explicit_count != 0 && in.count() % explicit_count == 0, "bottom count (",
                      in.count(), ", shape ", in.shape_string(),
                      ") must be divisible by the product of the specified dimensions (",
                      explicit_count, ") to infer the -1 dim of reshape_param.shape");
    const int64_t inferred = in.count() / explicit_count;
    CREMA_CHECK_SHAPE(inferred <= INT32_MAX, "inferred dim too large: ", inferred);
    top_shape[start_axis + inferred_axis_] = static_cast<int>(inferred);
  }
  int64_t top_count = 1;
  for (int d : top_shape) top_count *= d;
  CREMA_CHECK_SHAPE(top_count == in.count(), "the new shape has ", top_count,
                    " elements but the bottom ", in.shape_string(), " has ", in.count(),
                    " (reshape_param.shape must keep the element count)");
  top[0]->Reshape(top_shape);
  top[0]->ShareData(in);
  top[0]->ShareDiff(in);
}

CREMA_REGISTER_LAYER(Reshape, ReshapeLayer);

}  // namespace crema
