#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void SgdStepKernel(int64_t n, const double* rate, double lr_mult, T momentum,
                              const double* loss, T* diff, T* history, T* weight) {
  if (loss != nullptr && !isfinite(*loss)) return;
  const T local_rate = static_cast<T>(*rate * lr_mult);
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    diff[i] = history[i] = momentum * history[i] + local_rate * diff[i];
    weight[i] -= diff[i];
  }
}

}  // namespace

template <typename T>
void SgdStep(int64_t n, const double* rate, double lr_mult, T momentum, const double* loss, T* diff,
             T* history, T* weight) {
  if (n == 0) return;
  SgdStepKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, rate, lr_mult, momentum, loss, diff,
                                                      history, weight);
  CheckLaunch("SGD step kernel");
}

template void SgdStep<float>(int64_t, const double*, double, float, const double*, float*, float*,
                             float*);
template void SgdStep<double>(int64_t, const double*, double, double, const double*, double*,
                              double*, double*);

}  // namespace crema::gpu
