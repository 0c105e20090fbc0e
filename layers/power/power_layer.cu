#include <cmath>

#include "layers/power/power_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// Powers 1 and 2 are computed without pow, as the CPU code.
struct PowerForward {
  double power, scale, shift;
  template <typename T>
  __device__ T operator()(T x) const {
    const T base = T(shift) + T(scale) * x;
    return power == 1 ? base : power == 2 ? base * base : pow(base, T(power));
  }
};

// diff_scale * base^(power - 1) (not Caffe's power * y / x, which is 0/0 at x = 0).
struct PowerBackward {
  double power, scale, shift, diff_scale;
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    const T base = T(shift) + T(scale) * x;
    const T derivative =
        power == 2 ? T(diff_scale) * base : T(diff_scale) * pow(base, T(power) - 1);
    return dy * derivative;
  }
};

}  // namespace

void PowerLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  if (diff_scale_ == 0) {
    // The input does not matter: scale or power is 0 (and Backward does not read it).
    CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
      const T shift = static_cast<T>(shift_), power = static_cast<T>(power_);
      const T value = power_ == 0 ? T(1) : static_cast<T>(std::pow(shift, power));
      if (count > 0) gpu::Set<T>(count, value, top[0]->mutable_gpu_data<T>());
    });
    return;
  }
  // Backward reads the input only for powers other than 1.
  const Blob& input = power_ == 1 ? *bottom[0] : input_.SaveGpu(*bottom[0], *top[0]);
  gpu::NeuronForward("Power forward", PowerForward{power_, scale_, shift_}, input, top[0]);
}

void PowerLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int64_t count = bottom[0]->count();
  if (diff_scale_ == 0 || power_ == 1) {
    CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
      if (count > 0)
        gpu::Scale<T>(count, static_cast<T>(diff_scale_), top[0]->gpu_diff<T>(),
                      bottom[0]->mutable_gpu_diff<T>());
    });
    return;
  }
  gpu::NeuronBackward("Power backward", PowerBackward{power_, scale_, shift_, diff_scale_}, *top[0],
                      bottom[0], input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
