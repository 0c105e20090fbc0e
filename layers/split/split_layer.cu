#include "layers/split/split_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {

// Forward only shares memory, wherever it lives.
void SplitLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) { ForwardCpu(bottom, top); }

void SplitLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* bottom_diff = bottom[0]->mutable_gpu_diff<T>();
    if (top.size() == 1) {
      gpu::Copy<T>(count, top[0]->gpu_diff<T>(), bottom_diff);
    } else {
      gpu::Add<T>(count, top[0]->gpu_diff<T>(), top[1]->gpu_diff<T>(), bottom_diff);
      for (size_t i = 2; i < top.size(); ++i)
        gpu::Axpy<T>(count, T(1), top[i]->gpu_diff<T>(), bottom_diff);
    }
  });
}

}  // namespace crema
