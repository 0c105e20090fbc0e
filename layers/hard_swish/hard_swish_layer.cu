#include "layers/hard_swish/hard_swish_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// x * std::min(std::max(x + 3, 0), 6) / 6, as the CPU code.
struct HardSwishForward {
  template <typename T>
  __device__ T operator()(T x) const {
    const T shifted = x + T(3);
    const T low = shifted < T(0) ? T(0) : shifted;
    const T relu6 = T(6) < low ? T(6) : low;
    return x * relu6 / T(6);
  }
};

struct HardSwishBackward {
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    const T derivative = x < -3 ? T(0) : x <= 3 ? x / T(3) + T(0.5) : T(1);
    return dy * derivative;
  }
};

}  // namespace

void HardSwishLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("HardSwish forward", HardSwishForward{}, input_.SaveGpu(*bottom[0], *top[0]),
                     top[0]);
}

void HardSwishLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("HardSwish backward", HardSwishBackward{}, *top[0], bottom[0],
                      input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
