#include "layers/tanh/tanh_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct TanHForward {
  template <typename T>
  __device__ T operator()(T x) const {
    return tanh(x);
  }
};

struct TanHBackward {
  template <typename T>
  __device__ T operator()(T dy, T y) const {
    return dy * (T(1) - y * y);
  }
};

}  // namespace

void TanHLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("TanH forward", TanHForward{}, *bottom[0], top[0]);
}

void TanHLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("TanH backward", TanHBackward{}, *top[0], bottom[0], *top[0]);
}

}  // namespace crema
