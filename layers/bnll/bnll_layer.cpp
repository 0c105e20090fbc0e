#include "layers/bnll/bnll_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

template <typename T>
void BNLLLayer::ForwardT(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i)
    top_data[i] = bottom_data[i] > 0 ? bottom_data[i] + std::log1p(std::exp(-bottom_data[i]))
                                     : std::log1p(std::exp(bottom_data[i]));
}

template <typename T>
void BNLLLayer::BackwardT(const Blob& top, Blob* bottom) const {
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i) bottom_diff[i] = -top_diff[i] * std::expm1(-top_data[i]);
}

void BNLLLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void BNLLLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(BNLL, BNLLLayer);

}  // namespace crema
