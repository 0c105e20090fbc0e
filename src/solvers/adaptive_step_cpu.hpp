#pragma once
// The CPU step AdaGrad and RMSProp share, in Caffe's call sequence (pow for the root) so that the
// rounding is Caffe's: diff = local_rate * diff / (sqrt(history) + delta); `update` is scratch.
#include <cstdint>

#include "math/math.hpp"

namespace crema::cpu {

template <typename T>
void RootNormalizedStep(int64_t n, T local_rate, T delta, const T* history, T* diff, T* update) {
  Powx(n, history, T(0.5), update);
  AddScalar(n, delta, update);
  Div(n, static_cast<const T*>(diff), static_cast<const T*>(update), update);
  Axpby(n, local_rate, static_cast<const T*>(update), T(0), diff);
}

}  // namespace crema::cpu
