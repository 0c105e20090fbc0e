#include "layers/split/split_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"
#include "math/activation.hpp"
#include "math/math.hpp"

namespace crema {

void SplitLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    CREMA_CHECK_SHAPE(top[i] != bottom[0], "top ", i,
                      " is the bottom blob; Split does not allow in-place computation");
    top[i]->ReshapeLike(*bottom[0]);
  }
}

void SplitLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top) t->ShareData(*bottom[0]);
}

template <typename T>
void SplitLayer::Backward(const BlobVec& top, Blob* bottom, const float* relu_slope) const {
  const int64_t count = bottom->count();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  // The sum of the top diffs over [begin, begin + n).
  const auto sum = [&](int64_t begin, int64_t n) {
    if (top.size() == 1) {
      cpu::Copy<T>(n, top[0]->cpu_diff<T>() + begin, bottom_diff + begin);
      return;
    }
    cpu::Add<T>(n, top[0]->cpu_diff<T>() + begin, top[1]->cpu_diff<T>() + begin,
                bottom_diff + begin);
    for (size_t i = 2; i < top.size(); ++i)
      cpu::Axpy<T>(n, T(1), top[i]->cpu_diff<T>() + begin, bottom_diff + begin);
  };
  if (relu_slope == nullptr) return sum(0, count);
  // With the ReLU fused (Layer::set_fused_relu_backward): its gradient on each chunk of the sum
  // while that is in the cache.
  const T* y = bottom->cpu_data<T>();
  const T slope = static_cast<T>(*relu_slope);
  constexpr int64_t kChunk = 8192;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for if (count > 262144)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, n = std::min(kChunk, count - begin);
    sum(begin, n);
    ReLUGradientSerial(n, y + begin, bottom_diff + begin, slope, bottom_diff + begin);
  }
}

void SplitLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  float slope = 0;
  const bool relu = TakeFusedReLUBackward(0, &slope);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom[0], relu ? &slope : nullptr));
}

CREMA_REGISTER_LAYER(Split, SplitLayer);

}  // namespace crema
