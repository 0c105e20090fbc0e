#include "layers/swish/swish_layer.hpp"
#include "math/elementwise_gpu.cuh"

namespace crema {
namespace {

// Writes sigmoid(beta * x) for Backward and y; in place, x[i] is read before y[i] is written.
template <typename T>
__global__ void SwishForward(int64_t n, const T* x, T beta, T* sigmoid, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T value = x[i];
    const T s = T(0.5) * tanh(T(0.5) * (beta * value)) + T(0.5);
    sigmoid[i] = s;
    y[i] = value * s;
  }
}

struct SwishBackward {
  double beta;
  template <typename T>
  __device__ T operator()(T dy, T sigmoid, T y) const {
    return dy * (T(beta) * y + sigmoid * (T(1) - T(beta) * y));
  }
};

}  // namespace

void SwishLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T beta = static_cast<T>(layer_param_.swish_param().beta());
    SwishForward<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
        n, bottom[0]->gpu_data<T>(), beta, sigmoid_output_.mutable_gpu_data<T>(),
        top[0]->mutable_gpu_data<T>());
  });
  gpu::CheckLaunch("Swish forward");
}

void SwishLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  gpu::NeuronBackward("Swish backward", SwishBackward{layer_param_.swish_param().beta()}, *top[0],
                      bottom[0], sigmoid_output_, *top[0]);
}

}  // namespace crema
