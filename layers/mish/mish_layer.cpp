#include "layers/mish/mish_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

namespace {

// log(1 + exp(x)) without overflow for large x.
template <typename T>
T Softplus(T x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

}  // namespace

void MishLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void MishLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    top_data[i] = x * std::tanh(Softplus(x));
  }
}

template <typename T>
void MishLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    const T t = std::tanh(Softplus(x));
    const T sigmoid = T(0.5) * std::tanh(T(0.5) * x) + T(0.5);
    bottom_diff[i] = top_diff[i] * (t + x * sigmoid * (T(1) - t * t));
  }
}

void MishLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void MishLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Mish, MishLayer);

}  // namespace crema
