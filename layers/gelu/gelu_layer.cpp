#include "layers/gelu/gelu_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void GELULayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void GELULayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  const T inv_sqrt2 = static_cast<T>(0.70710678118654752440);
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    top_data[i] = T(0.5) * x * (T(1) + std::erf(x * inv_sqrt2));
  }
}

template <typename T>
void GELULayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const T inv_sqrt2 = static_cast<T>(0.70710678118654752440);
  const T inv_sqrt_2pi = static_cast<T>(0.39894228040143267794);
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    const T cdf = T(0.5) * (T(1) + std::erf(x * inv_sqrt2));
    const T pdf = inv_sqrt_2pi * std::exp(T(-0.5) * x * x);
    bottom_diff[i] = top_diff[i] * (cdf + x * pdf);
  }
}

void GELULayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void GELULayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(GELU, GELULayer);

}  // namespace crema
