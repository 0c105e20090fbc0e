#include "layers/bnll/bnll_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct BNLLForward {
  template <typename T>
  __device__ T operator()(T x) const {
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  }
};

// dy/dx = 1 - exp(-y), from y so that in-place use is right.
struct BNLLBackward {
  template <typename T>
  __device__ T operator()(T dy, T y) const {
    return -dy * expm1(-y);
  }
};

}  // namespace

void BNLLLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("BNLL forward", BNLLForward{}, *bottom[0], top[0]);
}

void BNLLLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("BNLL backward", BNLLBackward{}, *top[0], bottom[0], *top[0]);
}

}  // namespace crema
