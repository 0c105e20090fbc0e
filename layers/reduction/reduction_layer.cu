#include "layers/reduction/reduction_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// dx = coeff * dy[n] * (1 | sign(x) | 2x) for SUM and MEAN | ASUM | SUMSQ, n = the row of x.
template <typename T>
__global__ void ReductionBackward(int64_t count, int64_t dim, ReductionParameter::ReductionOp op,
                                  T coeff, const T* x, const T* top_diff, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    const T scale = top_diff[i / dim] * coeff;
    switch (op) {
      case ReductionParameter::ASUM:
        dx[i] = scale * static_cast<T>((T(0) < x[i]) - (x[i] < T(0)));
        break;
      case ReductionParameter::SUMSQ:
        dx[i] = 2 * scale * x[i];
        break;
      default:  // SUM, MEAN
        dx[i] = scale;
        break;
    }
  }
}

}  // namespace

void ReductionLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (num_ == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* x = bottom[0]->gpu_data<T>();
    T* top_data = top[0]->mutable_gpu_data<T>();
    if (op_ == ReductionParameter::ASUM) {
      T* abs = abs_.mutable_gpu_data<T>();
      gpu::Abs<T>(bottom[0]->count(), x, abs);
      x = abs;
    }
    // Row sums (of x * x for SUMSQ), accumulated in double.
    gpu::ReduceByAxis<T>(1, num_, dim_, x, op_ == ReductionParameter::SUMSQ ? x : nullptr, false,
                         top_data);
    if (coeff_ != 1.0) gpu::Scal<T>(num_, static_cast<T>(coeff_), top_data);
  });
}

void ReductionLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    ReductionBackward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, dim_, op_, static_cast<T>(coeff_), bottom[0]->gpu_data<T>(), top[0]->gpu_diff<T>(),
        bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("Reduction backward");
  });
}

}  // namespace crema
