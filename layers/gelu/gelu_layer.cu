#include "layers/gelu/gelu_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct GELUForward {
  template <typename T>
  __device__ T operator()(T x) const {
    const T inv_sqrt2 = static_cast<T>(0.70710678118654752440);
    return T(0.5) * x * (T(1) + erf(x * inv_sqrt2));
  }
};

struct GELUBackward {
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    const T inv_sqrt2 = static_cast<T>(0.70710678118654752440);
    const T inv_sqrt_2pi = static_cast<T>(0.39894228040143267794);
    const T cdf = T(0.5) * (T(1) + erf(x * inv_sqrt2));
    const T pdf = inv_sqrt_2pi * exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
};

}  // namespace

void GELULayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("GELU forward", GELUForward{}, input_.SaveGpu(*bottom[0], *top[0]), top[0]);
}

void GELULayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("GELU backward", GELUBackward{}, *top[0], bottom[0],
                      input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
