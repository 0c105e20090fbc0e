#include "layers/hard_swish/hard_swish_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void HardSwishLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void HardSwishLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    top_data[i] = x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
  }
}

template <typename T>
void HardSwishLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    const T derivative = x < -3 ? T(0) : x <= 3 ? x / T(3) + T(0.5) : T(1);
    bottom_diff[i] = top_diff[i] * derivative;
  }
}

void HardSwishLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void HardSwishLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(HardSwish, HardSwishLayer);

}  // namespace crema
