#include "layers/lstm_unit/lstm_unit_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void LSTMUnitLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& c_prev = *bottom[0];
  CREMA_CHECK_SHAPE(c_prev.num_axes() == 3 && c_prev.shape(0) == 1,
                    "bottom[0] (c_prev) must be 1 x N x D, got ", c_prev.shape_string());
  const int num = c_prev.shape(1);
  hidden_dim_ = c_prev.shape(2);
  CREMA_CHECK_SHAPE(bottom[1]->num_axes() == 3 && bottom[1]->shape(0) == 1 &&
                        bottom[1]->shape(1) == num && bottom[1]->shape(2) == 4 * hidden_dim_,
                    "bottom[1] (gate inputs) must be 1 x ", num, " x ", 4 * hidden_dim_,
                    " for c_prev ", c_prev.shape_string(), ", got ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(
      bottom[2]->num_axes() == 2 && bottom[2]->shape(0) == 1 && bottom[2]->shape(1) == num,
      "bottom[2] (cont) must be 1 x ", num, ", got ", bottom[2]->shape_string());
  for (int i = 1; i < 3; ++i)
    CREMA_CHECK_SHAPE(bottom[i]->dtype() == c_prev.dtype(), "bottom[", i, "] (",
                      DataTypeName(bottom[i]->dtype()), ") must have the element type of c_prev (",
                      DataTypeName(c_prev.dtype()), ")");
  for (Blob* t : top)
    CREMA_CHECK_SHAPE(t != bottom[0] && t != bottom[1] && t != bottom[2],
                      "does not support in-place computation");
  top[0]->ReshapeLike(c_prev);
  top[1]->ReshapeLike(c_prev);
}

template <typename T>
void LSTMUnitLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  lstm_unit::Forward<T>(bottom[0]->shape(1), hidden_dim_, bottom[0]->cpu_data<T>(),
                        bottom[1]->cpu_data<T>(), bottom[2]->cpu_data<T>(),
                        top[0]->mutable_cpu_data<T>(), top[1]->mutable_cpu_data<T>());
}

template <typename T>
void LSTMUnitLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  lstm_unit::Backward<T>(bottom[0]->shape(1), hidden_dim_, bottom[0]->cpu_data<T>(),
                         bottom[1]->cpu_data<T>(), bottom[2]->cpu_data<T>(), top[0]->cpu_data<T>(),
                         top[0]->cpu_diff<T>(), top[1]->cpu_diff<T>(),
                         propagate_down[0] ? bottom[0]->mutable_cpu_diff<T>() : nullptr,
                         propagate_down[1] ? bottom[1]->mutable_cpu_diff<T>() : nullptr);
}

void LSTMUnitLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void LSTMUnitLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (propagate_down[2])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[2])");
  if (!propagate_down[0] && !propagate_down[1]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(LSTMUnit, LSTMUnitLayer);

}  // namespace crema
