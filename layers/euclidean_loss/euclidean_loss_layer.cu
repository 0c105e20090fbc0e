#include "layers/euclidean_loss/euclidean_loss_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {

// The loss and the top diff are scalars the host needs: the dot product and the loss weight are
// read back, as in Caffe.
void EuclideanLossLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* diff = diff_.mutable_gpu_data<T>();
    gpu::Sub<T>(count, bottom[0]->gpu_data<T>(), bottom[1]->gpu_data<T>(), diff);
    const T dot = count > 0 ? gpu::Dot<T>(count, diff, diff) : T(0);
    top[0]->mutable_cpu_data<T>()[0] = dot / static_cast<T>(bottom[0]->shape(0)) / T(2);
  });
}

void EuclideanLossLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    for (int i = 0; i < 2; ++i) {
      if (!propagate_down[i]) continue;
      const T sign = i == 0 ? T(1) : T(-1);
      const T alpha = sign * top[0]->cpu_diff<T>()[0] / static_cast<T>(bottom[i]->shape(0));
      gpu::Scale<T>(bottom[i]->count(), alpha, diff_.gpu_data<T>(),
                    bottom[i]->mutable_gpu_diff<T>());
    }
  });
}

}  // namespace crema
