#include "layers/exp/exp_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct ExpForward {
  double inner_scale, outer_scale;
  template <typename T>
  __device__ T operator()(T x) const {
    return T(outer_scale) * exp(T(inner_scale) * x);
  }
};

struct ExpBackward {
  double inner_scale;
  template <typename T>
  __device__ T operator()(T dy, T y) const {
    return dy * y * T(inner_scale);
  }
};

}  // namespace

void ExpLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("Exp forward", ExpForward{inner_scale_, outer_scale_}, *bottom[0], top[0]);
}

void ExpLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("Exp backward", ExpBackward{inner_scale_}, *top[0], bottom[0], *top[0]);
}

}  // namespace crema
