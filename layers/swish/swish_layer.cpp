#include "layers/swish/swish_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void SwishLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  if (sigmoid_output_.dtype() != bottom[0]->dtype()) sigmoid_output_.set_dtype(bottom[0]->dtype());
  sigmoid_output_.ReshapeLike(*bottom[0]);
}

template <typename T>
void SwishLayer::ForwardT(const Blob& bottom, Blob* top) {
  const T beta = static_cast<T>(layer_param_.swish_param().beta());
  const T* bottom_data = bottom.cpu_data<T>();
  T* sigmoid = sigmoid_output_.mutable_cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    sigmoid[i] = T(0.5) * std::tanh(T(0.5) * (beta * x)) + T(0.5);
    top_data[i] = x * sigmoid[i];
  }
}

template <typename T>
void SwishLayer::BackwardT(const Blob& top, Blob* bottom) {
  const T beta = static_cast<T>(layer_param_.swish_param().beta());
  const T* sigmoid = sigmoid_output_.cpu_data<T>();
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i) {
    const T y = top_data[i];
    bottom_diff[i] = top_diff[i] * (beta * y + sigmoid[i] * (T(1) - beta * y));
  }
}

void SwishLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void SwishLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Swish, SwishLayer);

}  // namespace crema
