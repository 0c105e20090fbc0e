#include "math/sgd_step.hpp"

namespace crema::cpu {
namespace {

template <typename T>
inline void Step(int64_t i, T rate, T momentum, T decay, T* weights, T* diff, T* history) {
  const T h = momentum * history[i] + rate * (diff[i] + decay * weights[i]);
  history[i] = h;
  diff[i] = h;
  weights[i] = weights[i] - h;
}

}  // namespace

template <typename T>
void SgdL2Step(int64_t n, T rate, T momentum, T decay, T* weights, T* diff, T* history) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) Step(i, rate, momentum, decay, weights, diff, history);
}

template <typename T>
__attribute__((noinline)) void SgdL2StepSerial(int64_t n, T rate, T momentum, T decay, T* weights,
                                               T* diff, T* history) {
  for (int64_t i = 0; i < n; ++i) Step(i, rate, momentum, decay, weights, diff, history);
}

template void SgdL2Step<float>(int64_t, float, float, float, float*, float*, float*);
template void SgdL2Step<double>(int64_t, double, double, double, double*, double*, double*);
template void SgdL2StepSerial<float>(int64_t, float, float, float, float*, float*, float*);
template void SgdL2StepSerial<double>(int64_t, double, double, double, double*, double*, double*);

}  // namespace crema::cpu
