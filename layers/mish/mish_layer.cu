#include "layers/mish/mish_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// log(1 + exp(x)) without overflow for large x, as the CPU code.
template <typename T>
__device__ T Softplus(T x) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

struct MishForward {
  template <typename T>
  __device__ T operator()(T x) const {
    return x * tanh(Softplus(x));
  }
};

struct MishBackward {
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    const T t = tanh(Softplus(x));
    const T sigmoid = T(0.5) * tanh(T(0.5) * x) + T(0.5);
    return dy * (t + x * sigmoid * (T(1) - t * t));
  }
};

}  // namespace

void MishLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("Mish forward", MishForward{}, input_.SaveGpu(*bottom[0], *top[0]), top[0]);
}

void MishLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("Mish backward", MishBackward{}, *top[0], bottom[0],
                      input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
