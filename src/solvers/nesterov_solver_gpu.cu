#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void NesterovUpdateKernel(int64_t n, T local_rate, T momentum, T* diff, T* history) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T previous = history[i];
    const T current = history[i] = momentum * previous + local_rate * diff[i];
    diff[i] = (1 + momentum) * current - momentum * previous;
  }
}

}  // namespace

template <typename T>
void NesterovUpdate(int64_t n, T local_rate, T momentum, T* diff, T* history) {
  if (n == 0) return;
  NesterovUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, local_rate, momentum, diff,
                                                             history);
  CheckLaunch("Nesterov update kernel");
}

template void NesterovUpdate<float>(int64_t, float, float, float*, float*);
template void NesterovUpdate<double>(int64_t, double, double, double*, double*);

}  // namespace crema::gpu
