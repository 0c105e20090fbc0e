#include "layers/absval/absval_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"

namespace crema {

void AbsValLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0],
                    "does not allow in-place computation: its gradient needs the input");
  NeuronLayer::Reshape(bottom, top);
}

template <typename T>
void AbsValLayer::ForwardT(const Blob& bottom, Blob* top) const {
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i) top_data[i] = std::abs(bottom_data[i]);
}

template <typename T>
void AbsValLayer::BackwardT(const Blob& top, Blob* bottom) const {
  const T* bottom_data = bottom->cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  for (int64_t i = 0; i < count; ++i) {
    const T x = bottom_data[i];
    bottom_diff[i] = x > 0 ? top_diff[i] : x < 0 ? -top_diff[i] : T(0);
  }
}

void AbsValLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void AbsValLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(AbsVal, AbsValLayer);

}  // namespace crema
