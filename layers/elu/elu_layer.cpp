#include "layers/elu/elu_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

template <typename T>
void ELULayer::ForwardT(const Blob& bottom, Blob* top) const {
  const T alpha = static_cast<T>(layer_param_.elu_param().alpha());
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    top_data[i] = std::max(x, T(0)) + alpha * (std::exp(std::min(x, T(0))) - T(1));
  }
}

template <typename T>
void ELULayer::BackwardT(const Blob& top, Blob* bottom) const {
  const T alpha = static_cast<T>(layer_param_.elu_param().alpha());
  // alpha * exp(x) = alpha + y for x <= 0; in place, bottom data is y, whose sign is x's.
  const T* bottom_data = bottom->cpu_data<T>();
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i)
    bottom_diff[i] = top_diff[i] * (bottom_data[i] > 0 ? T(1) : alpha + top_data[i]);
}

void ELULayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void ELULayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(ELU, ELULayer);

}  // namespace crema
