#include "layers/relu6/relu6_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// std::min(std::max(x, 0), 6), as the CPU code.
struct ReLU6Forward {
  template <typename T>
  __device__ T operator()(T x) const {
    const T low = x < T(0) ? T(0) : x;
    return T(6) < low ? T(6) : low;
  }
};

// From y, so that in-place use is right.
struct ReLU6Backward {
  template <typename T>
  __device__ T operator()(T dy, T y) const {
    return y > 0 && y < 6 ? dy : T(0);
  }
};

}  // namespace

void ReLU6Layer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("ReLU6 forward", ReLU6Forward{}, *bottom[0], top[0]);
}

void ReLU6Layer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("ReLU6 backward", ReLU6Backward{}, *top[0], bottom[0], *top[0]);
}

}  // namespace crema
