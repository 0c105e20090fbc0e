#include "layers/log/log_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void LogLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const LogParameter& param = layer_param_.log_param();
  const double base = param.base();
  CREMA_CHECK_PARAM(base == -1 || (base > 0 && base != 1), "log_param.base",
                    "must be > 0 and != 1 (or -1 for e), got ", base);
  const double log_base = base == -1 ? 1.0 : std::log(base);
  CREMA_CHECK_PARAM(std::isfinite(log_base) && std::isfinite(1 / log_base), "log_param.base",
                    "gives log(base) = ", log_base, ", which is not usable");
  base_scale_ = 1 / log_base;
  backward_num_scale_ = param.scale() / log_base;
}

void LogLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void LogLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  const LogParameter& param = layer_param_.log_param();
  const T scale = static_cast<T>(param.scale()), shift = static_cast<T>(param.shift());
  const T base_scale = static_cast<T>(base_scale_);
  for (int64_t i = 0; i < count; ++i) {
    const T y = std::log(shift + scale * bottom_data[i]);
    top_data[i] = base_scale_ == 1 ? y : base_scale * y;
  }
}

template <typename T>
void LogLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const LogParameter& param = layer_param_.log_param();
  const T scale = static_cast<T>(param.scale()), shift = static_cast<T>(param.shift());
  const T num_scale = static_cast<T>(backward_num_scale_);
  for (int64_t i = 0; i < count; ++i)
    bottom_diff[i] = top_diff[i] * num_scale / (shift + scale * bottom_data[i]);
}

void LogLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void LogLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Log, LogLayer);

}  // namespace crema
