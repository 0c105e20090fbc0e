#pragma once
// GPU kernels of the update rules (built when CREMA_WITH_CUDA).
#ifdef CREMA_WITH_CUDA
#include <cstdint>

namespace crema::gpu {

// history = local_rate * diff + momentum * history; diff = history (one pass).
template <typename T>
void SgdUpdate(int64_t n, T local_rate, T momentum, T* diff, T* history);

}  // namespace crema::gpu
#endif
