#include "layers/euclidean_loss/euclidean_loss_layer.hpp"

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void EuclideanLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  CREMA_CHECK_SHAPE(bottom[0]->count(1) == bottom[1]->count(1),
                    "the two bottoms must have the same number of values per item, got ",
                    bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(bottom[1]->dtype() == bottom[0]->dtype(), "bottom[1] (",
                    DataTypeName(bottom[1]->dtype()), ") must have the element type of bottom[0] (",
                    DataTypeName(bottom[0]->dtype()), ")");
  diff_.set_dtype(bottom[0]->dtype());
  diff_.ReshapeLike(*bottom[0]);
}

template <typename T>
void EuclideanLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  T* diff = diff_.mutable_cpu_data<T>();
  cpu::Sub<T>(count, bottom[0]->cpu_data<T>(), bottom[1]->cpu_data<T>(), diff);
  const T dot = cpu::Dot<T>(count, diff, diff);
  top[0]->mutable_cpu_data<T>()[0] = dot / static_cast<T>(bottom[0]->shape(0)) / T(2);
}

template <typename T>
void EuclideanLossLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const T sign = i == 0 ? T(1) : T(-1);
    const T alpha = sign * top[0]->cpu_diff<T>()[0] / static_cast<T>(bottom[i]->shape(0));
    cpu::Scale<T>(bottom[i]->count(), alpha, diff_.cpu_data<T>(), bottom[i]->mutable_cpu_diff<T>());
  }
}

void EuclideanLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void EuclideanLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(EuclideanLoss, EuclideanLossLayer);

}  // namespace crema
