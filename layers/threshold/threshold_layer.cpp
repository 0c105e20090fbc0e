#include "layers/threshold/threshold_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

template <typename T>
void ThresholdLayer::ForwardT(const Blob& bottom, Blob* top) const {
  const T threshold = static_cast<T>(layer_param_.threshold_param().threshold());
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
  for (int64_t i = 0; i < count; ++i) top_data[i] = bottom_data[i] > threshold ? T(1) : T(0);
}

void ThresholdLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(*bottom[0], top[0]));
}

void ThresholdLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[0],
                    "has no gradient (a step function; Caffe does not implement its Backward), "
                    "but a gradient was requested for its bottom");
}

CREMA_REGISTER_LAYER(Threshold, ThresholdLayer);

}  // namespace crema
