#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void AdaGradUpdateKernel(int64_t n, T local_rate, T delta, T* diff, T* history) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T gradient = diff[i];
    const T accumulated = history[i] = history[i] + gradient * gradient;
    diff[i] = local_rate * gradient / (sqrt(accumulated) + delta);
  }
}

}  // namespace

template <typename T>
void AdaGradUpdate(int64_t n, T local_rate, T delta, T* diff, T* history) {
  if (n == 0) return;
  AdaGradUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, local_rate, delta, diff, history);
  CheckLaunch("AdaGrad update kernel");
}

template void AdaGradUpdate<float>(int64_t, float, float, float*, float*);
template void AdaGradUpdate<double>(int64_t, double, double, double*, double*);

}  // namespace crema::gpu
