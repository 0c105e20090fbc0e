#include "layers/log/log_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

struct LogForward {
  double scale, shift, base_scale;
  template <typename T>
  __device__ T operator()(T x) const {
    const T y = log(T(shift) + T(scale) * x);
    return base_scale == 1 ? y : T(base_scale) * y;  // base e: no rescaling, as the CPU code
  }
};

struct LogBackward {
  double scale, shift, num_scale;
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    return dy * T(num_scale) / (T(shift) + T(scale) * x);
  }
};

}  // namespace

void LogLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const LogParameter& param = layer_param_.log_param();
  gpu::NeuronForward("Log forward", LogForward{param.scale(), param.shift(), base_scale_},
                     input_.SaveGpu(*bottom[0], *top[0]), top[0]);
}

void LogLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const LogParameter& param = layer_param_.log_param();
  gpu::NeuronBackward("Log backward",
                      LogBackward{param.scale(), param.shift(), backward_num_scale_}, *top[0],
                      bottom[0], input_.GetGpu(*bottom[0], *top[0]));
}

}  // namespace crema
