#pragma once
// GPU kernels of the update rules (built when CREMA_WITH_CUDA).
#ifdef CREMA_WITH_CUDA
#include <cstdint>

namespace crema::gpu {

// Plain SGD's whole step for one param, reading the rate from device memory (*rate, times
// lr_mult, rounded to T as the host's local rate is): history = momentum * history + local_rate *
// diff; diff = history; weight -= diff. Does nothing when `loss` is given and *loss is not finite.
template <typename T>
void SgdStep(int64_t n, const double* rate, double lr_mult, T momentum, const double* loss, T* diff,
             T* history, T* weight);

// The other rules, each one pass in Caffe's fused form (defined in <name>_solver_gpu.cu; the
// header comment of each solver states its math).
template <typename T>
void NesterovUpdate(int64_t n, T local_rate, T momentum, T* diff, T* history);
template <typename T>
void AdaGradUpdate(int64_t n, T local_rate, T delta, T* diff, T* history);
template <typename T>
void RMSPropUpdate(int64_t n, T local_rate, T rms_decay, T delta, T* diff, T* history);
template <typename T>
void AdaDeltaUpdate(int64_t n, T local_rate, T momentum, T delta, T* diff, T* history,
                    T* update_history);
template <typename T>
void AdamUpdate(int64_t n, T corrected_rate, T beta1, T beta2, T eps_hat, T* diff, T* m, T* v);

}  // namespace crema::gpu
#endif
