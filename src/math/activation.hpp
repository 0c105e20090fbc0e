#pragma once
// The ReLU of Caffe's ReLU layer, y = max(x, 0) + negative_slope * min(x, 0), and its gradient,
// shared by that layer and by the layers a net fuses a ReLU into (NetOptions::fuse_relu): the same
// expression in both places, so a fused ReLU gives the same bits as the layer.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace crema {

template <typename T>
inline T ReLUValue(T x, T negative_slope) {
  return std::max(x, T(0)) + negative_slope * std::min(x, T(0));
}

// The ReLU's gradient, Caffe's expression: dy times 1 where the ReLU's output y (or its input:
// the same sign for a slope >= 0) is positive, else times negative_slope.
// The factor is picked with bit masks, which the compiler vectorises (a conditional between
// floating-point values it leaves as a branch); the product is the same.
template <typename T>
inline T ReLUGradient(T dy, T y, T negative_slope) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(U) == sizeof(T), "float or double");
  const U keep = U{0} - static_cast<U>(y > 0);  // all ones where y > 0
  const T one = 1;
  U one_bits, slope_bits;
  std::memcpy(&one_bits, &one, sizeof(T));
  std::memcpy(&slope_bits, &negative_slope, sizeof(T));
  const U factor_bits = (one_bits & keep) | (slope_bits & ~keep);
  T factor;
  std::memcpy(&factor, &factor_bits, sizeof(T));
  return dy * factor;  // dy * (y > 0 ? 1 : negative_slope)
}

// dx[i] = ReLUGradient(dy[i], y[i]) for i in [0, n) on the calling thread; dx may be dy (in
// place: a loop of its own, which the compiler need not guard against partial overlap).
template <typename T>
void ReLUGradientSerial(int64_t n, const T* y, const T* dy, T negative_slope, T* dx) {
  if (dx == dy) {
    for (int64_t i = 0; i < n; ++i) dx[i] = ReLUGradient(dx[i], y[i], negative_slope);
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = ReLUGradient(dy[i], y[i], negative_slope);
  }
}

// x[i] = ReLUValue(x[i]) for i in [0, n), in parallel for large n.
template <typename T>
void ReLUInPlace(int64_t n, T negative_slope, T* x) {
#pragma omp parallel for if (n > 262144)
  for (int64_t i = 0; i < n; ++i) x[i] = ReLUValue(x[i], negative_slope);
}

}  // namespace crema
