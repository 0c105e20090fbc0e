#include "layers/split/split_layer.hpp"

#include "crema/layer_registry.hpp"
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
void SplitLayer::Backward(const BlobVec& top, Blob* bottom) const {
  const int64_t count = bottom->count();
  T* bottom_diff = bottom->mutable_cpu_diff<T>();
  if (top.size() == 1) {
    cpu::Copy<T>(count, top[0]->cpu_diff<T>(), bottom_diff);
    return;
  }
  cpu::Add<T>(count, top[0]->cpu_diff<T>(), top[1]->cpu_diff<T>(), bottom_diff);
  for (size_t i = 2; i < top.size(); ++i)
    cpu::Axpy<T>(count, T(1), top[i]->cpu_diff<T>(), bottom_diff);
}

void SplitLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom[0]));
}

CREMA_REGISTER_LAYER(Split, SplitLayer);

}  // namespace crema
