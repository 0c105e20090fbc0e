#include "layers/threshold/threshold_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct ThresholdForward {
  double threshold;
  template <typename T>
  __device__ T operator()(T x) const {
    return x > T(threshold) ? T(1) : T(0);
  }
};

}  // namespace

void ThresholdLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  gpu::NeuronForward("Threshold forward",
                     ThresholdForward{layer_param_.threshold_param().threshold()}, *bottom[0],
                     top[0]);
}

// No gradient to compute: only the CPU code's check that none was asked for (it reads no data).
void ThresholdLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  BackwardCpu(top, propagate_down, bottom);
}

}  // namespace crema
