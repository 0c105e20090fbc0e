#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void SgdUpdateKernel(int64_t n, T local_rate, T momentum, T* diff, T* history) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { diff[i] = history[i] = momentum * history[i] + local_rate * diff[i]; }
}

}  // namespace

template <typename T>
void SgdUpdate(int64_t n, T local_rate, T momentum, T* diff, T* history) {
  if (n == 0) return;
  SgdUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, local_rate, momentum, diff, history);
  CheckLaunch("SGD update kernel");
}

template void SgdUpdate<float>(int64_t, float, float, float*, float*);
template void SgdUpdate<double>(int64_t, double, double, double*, double*);

}  // namespace crema::gpu
