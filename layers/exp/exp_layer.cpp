#include "layers/exp/exp_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void ExpLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ExpParameter& param = layer_param_.exp_param();
  const double base = param.base();
  CREMA_CHECK_PARAM(base == -1 || base > 0, "exp_param.base", "must be > 0 (or -1 for e), got ",
                    base);
  // y = outer_scale * exp(inner_scale * x); base -1 gives ln(base) = 1 exactly.
  const double log_base = base == -1 ? 1.0 : std::log(base);
  const double shift = param.shift();
  inner_scale_ = log_base * param.scale();
  outer_scale_ = shift == 0 ? 1.0 : base == -1 ? std::exp(shift) : std::pow(base, shift);
}

template <typename T>
void ExpLayer::ForwardT(const Blob& bottom, Blob* top) const {
  const T inner_scale = static_cast<T>(inner_scale_);
  const T outer_scale = static_cast<T>(outer_scale_);
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i)
    top_data[i] = outer_scale * std::exp(inner_scale * bottom_data[i]);
}

template <typename T>
void ExpLayer::BackwardT(const Blob& top, Blob* bottom) const {
  const T inner_scale = static_cast<T>(inner_scale_);
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i) bottom_diff[i] = top_diff[i] * top_data[i] * inner_scale;
}

void ExpLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void ExpLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Exp, ExpLayer);

}  // namespace crema
