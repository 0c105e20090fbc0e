#include "layers/clip/clip_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// std::max(min, std::min(x, max)), as the CPU code.
struct ClipForward {
  double min, max;
  template <typename T>
  __device__ T operator()(T x) const {
    const T upper = T(max) < x ? T(max) : x;
    return T(min) < upper ? upper : T(min);
  }
};

// 1 on [min, max], both ends included, as Caffe.
struct ClipBackward {
  double min, max;
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    return x >= T(min) && x <= T(max) ? dy : T(0);
  }
};

}  // namespace

void ClipLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const ClipParameter& param = layer_param_.clip_param();
  gpu::NeuronForward("Clip forward", ClipForward{param.min(), param.max()},
                     input_.SaveGpu(*bottom[0], *top[0]), top[0]);
}

void ClipLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const ClipParameter& param = layer_param_.clip_param();
  gpu::NeuronBackward("Clip backward", ClipBackward{param.min(), param.max()}, *top[0], bottom[0],
                      input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
