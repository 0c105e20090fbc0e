#include "layers/relu/relu_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"
#include "math/activation.hpp"

namespace crema {

template <typename T>
void ReLULayer::Forward(const Blob& bottom, Blob* top) const {
  const T negative_slope = static_cast<T>(layer_param_.relu_param().negative_slope());
  const T* bottom_data = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  const int64_t count = bottom.count();
#pragma omp parallel for if (count > 262144)
  for (int64_t i = 0; i < count; ++i) top_data[i] = ReLUValue(bottom_data[i], negative_slope);
}

template <typename T>
void ReLULayer::Backward(const Blob& top, Blob* bottom) const {
  const T negative_slope = static_cast<T>(layer_param_.relu_param().negative_slope());
  // In place, bottom data holds y, which has the sign of x (for a slope >= 0, as in Caffe).
  const T* bottom_data = bottom->cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  const int64_t count = bottom->count();
  // Element-wise, in chunks on the threads; in place bottom_diff is top_diff.
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for if (count > 262144)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    ReLUGradientSerial(std::min(kChunk, count - begin), bottom_data + begin, top_diff + begin,
                       negative_slope, bottom_diff + begin);
  }
}

void ReLULayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void ReLULayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(ReLU, ReLULayer);

}  // namespace crema
