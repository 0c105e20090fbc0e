#include "layers/sigmoid/sigmoid_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct SigmoidForward {
  template <typename T>
  __device__ T operator()(T x) const {
    return T(0.5) * tanh(T(0.5) * x) + T(0.5);
  }
};

struct SigmoidBackward {
  template <typename T>
  __device__ T operator()(T dy, T y) const {
    return dy * y * (T(1) - y);
  }
};

}  // namespace

void SigmoidLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("Sigmoid forward", SigmoidForward{}, *bottom[0], top[0]);
}

void SigmoidLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("Sigmoid backward", SigmoidBackward{}, *top[0], bottom[0], *top[0]);
}

}  // namespace crema
