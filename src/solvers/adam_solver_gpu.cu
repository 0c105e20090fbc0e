#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"

namespace crema::gpu {
namespace {

template <typename T>
__global__ void AdamUpdateKernel(int64_t n, T corrected_rate, T beta1, T beta2, T eps_hat, T* diff,
                                 T* m, T* v) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const T gradient = diff[i];
    const T first = m[i] = m[i] * beta1 + gradient * (1 - beta1);
    const T second = v[i] = v[i] * beta2 + gradient * gradient * (1 - beta2);
    diff[i] = corrected_rate * first / (sqrt(second) + eps_hat);
  }
}

}  // namespace

template <typename T>
void AdamUpdate(int64_t n, T corrected_rate, T beta1, T beta2, T eps_hat, T* diff, T* m, T* v) {
  if (n == 0) return;
  AdamUpdateKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, corrected_rate, beta1, beta2, eps_hat,
                                                         diff, m, v);
  CheckLaunch("Adam update kernel");
}

template void AdamUpdate<float>(int64_t, float, float, float, float, float*, float*, float*);
template void AdamUpdate<double>(int64_t, double, double, double, double, double*, double*,
                                 double*);

}  // namespace crema::gpu
