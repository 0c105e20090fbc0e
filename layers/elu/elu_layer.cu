#include "layers/elu/elu_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// std::max(x, 0) + alpha * (exp(std::min(x, 0)) - 1), as the CPU code.
struct ELUForward {
  double alpha;
  template <typename T>
  __device__ T operator()(T x) const {
    return (x < T(0) ? T(0) : x) + T(alpha) * (exp(T(0) < x ? T(0) : x) - T(1));
  }
};

// alpha * exp(x) = alpha + y for x <= 0; in place, x is y, whose sign is x's.
struct ELUBackward {
  double alpha;
  template <typename T>
  __device__ T operator()(T dy, T x, T y) const {
    return dy * (x > 0 ? T(1) : T(alpha) + y);
  }
};

}  // namespace

void ELULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("ELU forward", ELUForward{layer_param_.elu_param().alpha()}, *bottom[0],
                     top[0]);
}

void ELULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("ELU backward", ELUBackward{layer_param_.elu_param().alpha()}, *top[0],
                      bottom[0], *bottom[0], *top[0]);
}

}  // namespace crema
