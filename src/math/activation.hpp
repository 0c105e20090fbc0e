#pragma once
// The ReLU of Caffe's ReLU layer, y = max(x, 0) + negative_slope * min(x, 0), shared by that
// layer and by the layers a net fuses a ReLU into (NetOptions::fuse_relu): the same expression
// in both places, so a fused ReLU gives the same bits as the layer.
#include <algorithm>
#include <cstdint>

namespace crema {

template <typename T>
inline T ReLUValue(T x, T negative_slope) {
  return std::max(x, T(0)) + negative_slope * std::min(x, T(0));
}

// x[i] = ReLUValue(x[i]) for i in [0, n), in parallel for large n.
template <typename T>
void ReLUInPlace(int64_t n, T negative_slope, T* x) {
#pragma omp parallel for if (n > 262144)
  for (int64_t i = 0; i < n; ++i) x[i] = ReLUValue(x[i], negative_slope);
}

}  // namespace crema
