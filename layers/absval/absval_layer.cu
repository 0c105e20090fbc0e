#include "layers/absval/absval_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct AbsValForward {
  template <typename T>
  __device__ T operator()(T x) const {
    return fabs(x);
  }
};

// dy/dx = sign(x), sign(0) = 0.
struct AbsValBackward {
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    return x > 0 ? dy : x < 0 ? -dy : T(0);
  }
};

}  // namespace

void AbsValLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("AbsVal forward", AbsValForward{}, *bottom[0], top[0]);
}

void AbsValLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("AbsVal backward", AbsValBackward{}, *top[0], bottom[0], *bottom[0]);
}

}  // namespace crema
