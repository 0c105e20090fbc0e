#include "layers/dropout/dropout_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// y = x * keep(i) * scale with the layer's counter-based mask (no stored mask).
template <typename T>
__global__ void ApplyMask(int64_t n, const T* x, uint64_t seed, double keep_prob, T scale, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    y[i] = x[i] * static_cast<T>(DropoutLayer::Keep(seed, i, keep_prob)) * scale;
  }
}

}  // namespace

void DropoutLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    T* y = top[0]->mutable_gpu_data<T>();
    if (phase_ == TRAIN) {
      NewMask(count);
      const T scale = static_cast<T>(scale_train_ ? scale_ : 1.0);
      if (count > 0)
        ApplyMask<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
            count, x, mask_seed_, 1.0 - threshold_, scale, y);
      gpu::CheckLaunch("Dropout forward");
    } else if (scale_train_) {
      gpu::Copy<T>(count, x, y);
    } else {
      gpu::Scale<T>(count, static_cast<T>(1.0 - threshold_), x, y);
    }
  });
}

void DropoutLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* dy = top[0]->gpu_diff<T>();
    T* dx = bottom[0]->mutable_gpu_diff<T>();
    if (phase_ == TRAIN) {
      const T scale = static_cast<T>(scale_train_ ? scale_ : 1.0);
      if (count > 0)
        ApplyMask<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
            count, dy, mask_seed_, 1.0 - threshold_, scale, dx);
      gpu::CheckLaunch("Dropout backward");
    } else if (scale_train_) {
      gpu::Copy<T>(count, dy, dx);
    } else {
      gpu::Scale<T>(count, static_cast<T>(1.0 - threshold_), dy, dx);
    }
  });
}

}  // namespace crema
