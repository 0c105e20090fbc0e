#include "layers/power/power_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void PowerLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const PowerParameter& param = layer_param_.power_param();
  power_ = param.power();
  scale_ = param.scale();
  shift_ = param.shift();
  diff_scale_ = power_ * scale_;
}

void PowerLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void PowerLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  const T power = static_cast<T>(power_), scale = static_cast<T>(scale_);
  const T shift = static_cast<T>(shift_);
  if (diff_scale_ == 0) {
    // The input does not matter: scale or power is 0.
    const T value = power_ == 0 ? T(1) : static_cast<T>(std::pow(shift, power));
    std::fill(top_data, top_data + count, value);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const T base = shift + scale * bottom_data[i];
    top_data[i] = power_ == 1 ? base : power_ == 2 ? base * base : std::pow(base, power);
  }
}

template <typename T>
void PowerLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const T power = static_cast<T>(power_), scale = static_cast<T>(scale_);
  const T shift = static_cast<T>(shift_), diff_scale = static_cast<T>(diff_scale_);
  if (diff_scale_ == 0 || power_ == 1) {
    for (int64_t i = 0; i < count; ++i) bottom_diff[i] = top_diff[i] * diff_scale;
    return;
  }
  // diff_scale * base^(power - 1) rather than Caffe's power * y / x, which is 0/0 at x = 0.
  for (int64_t i = 0; i < count; ++i) {
    const T base = shift + scale * bottom_data[i];
    const T derivative = power_ == 2 ? diff_scale * base : diff_scale * std::pow(base, power - 1);
    bottom_diff[i] = top_diff[i] * derivative;
  }
}

void PowerLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void PowerLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Power, PowerLayer);

}  // namespace crema
