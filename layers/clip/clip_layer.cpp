#include "layers/clip/clip_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void ClipLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const ClipParameter& param = layer_param_.clip_param();
  CREMA_CHECK_PARAM(param.has_min(), "clip_param.min", "is required");
  CREMA_CHECK_PARAM(param.has_max(), "clip_param.max", "is required");
  CREMA_CHECK_PARAM(param.min() <= param.max(), "clip_param.max", "must be >= clip_param.min (",
                    param.min(), "), got ", param.max());
}

void ClipLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  NeuronLayer::Reshape(bottom, top);
  input_.Reshape(*bottom[0], *top[0]);
}

template <typename T>
void ClipLayer::ForwardT(const Blob& bottom, Blob* top) {
  const int64_t count = bottom.count();
  const T* bottom_data = input_.Save<T>(bottom, *top);
  T* top_data = top->mutable_cpu_data<T>();
  const T min = static_cast<T>(layer_param_.clip_param().min());
  const T max = static_cast<T>(layer_param_.clip_param().max());
  for (int64_t i = 0; i < count; ++i) top_data[i] = std::max(min, std::min(bottom_data[i], max));
}

template <typename T>
void ClipLayer::BackwardT(const Blob& top, Blob* bottom) {
  const int64_t count = bottom->count();
  const T* bottom_data = input_.Get<T>(*bottom, top);
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const T min = static_cast<T>(layer_param_.clip_param().min());
  const T max = static_cast<T>(layer_param_.clip_param().max());
  for (int64_t i = 0; i < count; ++i)
    bottom_diff[i] = bottom_data[i] >= min && bottom_data[i] <= max ? top_diff[i] : T(0);
}

void ClipLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void ClipLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, BackwardT<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Clip, ClipLayer);

}  // namespace crema
