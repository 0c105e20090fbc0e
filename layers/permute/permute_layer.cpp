#include "layers/permute/permute_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void PermuteLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PermuteParameter& param = layer_param_.permute_param();
  const int num_axes = bottom[0]->num_axes();
  order_.clear();
  for (int i = 0; i < param.order_size(); ++i) {
    const uint32_t axis = param.order(i);
    CREMA_CHECK_PARAM(axis < static_cast<uint32_t>(num_axes), "permute_param.order", "entry ", i,
                      " is ", axis, ", but the bottom ", bottom[0]->shape_string(), " has ",
                      num_axes, " axes (entries must be < ", num_axes, ")");
    CREMA_CHECK_PARAM(
        std::find(order_.begin(), order_.end(), static_cast<int>(axis)) == order_.end(),
        "permute_param.order", "names axis ", axis, " twice");
    order_.push_back(static_cast<int>(axis));
  }
  for (int axis = 0; axis < num_axes; ++axis)
    if (std::find(order_.begin(), order_.end(), axis) == order_.end()) order_.push_back(axis);
}

void PermuteLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Permute does not allow in-place computation");
  const int num_axes = bottom[0]->num_axes();
  CREMA_CHECK_SHAPE(num_axes == static_cast<int>(order_.size()), "Permute was set up for ",
                    order_.size(), " axes, but the bottom is now ", bottom[0]->shape_string());
  std::vector<int> shape(num_axes);
  for (int i = 0; i < num_axes; ++i) shape[i] = bottom[0]->shape(order_[i]);
  top[0]->Reshape(shape);
  old_steps_.assign(num_axes, 1);
  new_steps_.assign(num_axes, 1);
  for (int i = num_axes - 2; i >= 0; --i) {
    old_steps_[i] = old_steps_[i + 1] * bottom[0]->shape(i + 1);
    new_steps_[i] = new_steps_[i + 1] * shape[i + 1];
  }
  count_ = bottom[0]->count();
}

template <typename T>
void PermuteLayer::Permute(const T* src, T* dst, bool to_top) const {
  const int num_axes = static_cast<int>(order_.size());
  for (int64_t i = 0; i < count_; ++i) {
    // i indexes the top; find the bottom element it comes from.
    int64_t rest = i, old_index = 0;
    for (int a = 0; a < num_axes; ++a) {
      old_index += (rest / new_steps_[a]) * old_steps_[order_[a]];
      rest %= new_steps_[a];
    }
    if (to_top)
      dst[i] = src[old_index];
    else
      dst[old_index] = src[i];
  }
}

void PermuteLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       Permute<T>(bottom[0]->cpu_data<T>(), top[0]->mutable_cpu_data<T>(), true));
}

void PermuteLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       Permute<T>(top[0]->cpu_diff<T>(), bottom[0]->mutable_cpu_diff<T>(), false));
}

CREMA_REGISTER_LAYER(Permute, PermuteLayer);

}  // namespace crema
