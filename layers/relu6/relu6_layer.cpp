#include "layers/relu6/relu6_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

template <typename T>
void ReLU6Layer::ForwardT(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i) top_data[i] = std::min(std::max(bottom_data[i], T(0)), T(6));
}

template <typename T>
void ReLU6Layer::BackwardT(const Blob& top, Blob* bottom) const {
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i)
    bottom_diff[i] = top_data[i] > 0 && top_data[i] < 6 ? top_diff[i] : T(0);
}

void ReLU6Layer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void ReLU6Layer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(ReLU6, ReLU6Layer);

}  // namespace crema
