#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void RMSPropUpdateKernel(int64_t n, T local_rate, T rms_decay, T delta, T* diff,
                                    T* history) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T gradient = diff[i];
    const T mean_square = history[i] =
        rms_decay * history[i] + (1 - rms_decay) * gradient * gradient;
    diff[i] = local_rate * gradient / (sqrt(mean_square) + delta);
  }
}

}  // namespace

template <typename T>
void RMSPropUpdate(int64_t n, T local_rate, T rms_decay, T delta, T* diff, T* history) {
  if (n == 0) return;
  RMSPropUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, local_rate, rms_decay, delta, diff,
                                                            history);
  CheckLaunch("RMSProp update kernel");
}

template void RMSPropUpdate<float>(int64_t, float, float, float, float*, float*);
template void RMSPropUpdate<double>(int64_t, double, double, double, double*, double*);

}  // namespace crema::gpu
