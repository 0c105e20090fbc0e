#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void AdaDeltaUpdateKernel(int64_t n, T local_rate, T momentum, T delta, T* diff,
                                     T* history, T* update_history) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    T gradient = diff[i];
    const T mean_square = history[i] = momentum * history[i] + (1 - momentum) * gradient * gradient;
    gradient = gradient * sqrt((update_history[i] + delta) / (mean_square + delta));
    update_history[i] = momentum * update_history[i] + (1 - momentum) * gradient * gradient;
    diff[i] = local_rate * gradient;
  }
}

}  // namespace

template <typename T>
void AdaDeltaUpdate(int64_t n, T local_rate, T momentum, T delta, T* diff, T* history,
                    T* update_history) {
  if (n == 0) return;
  AdaDeltaUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, local_rate, momentum, delta, diff,
                                                             history, update_history);
  CheckLaunch("AdaDelta update kernel");
}

template void AdaDeltaUpdate<float>(int64_t, float, float, float, float*, float*, float*);
template void AdaDeltaUpdate<double>(int64_t, double, double, double, double*, double*, double*);

}  // namespace crema::gpu
