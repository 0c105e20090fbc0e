#include "layers/mvn/mvn_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// The CPU's mean: the double sum over the group divided by dim, rounded to T.
template <typename T>
__device__ T GroupMean(const T* sums, int64_t g, int64_t dim) {
  return static_cast<T>(static_cast<double>(sums[g]) / dim);
}

template <typename T>
__global__ void SubtractMean(int64_t count, int64_t dim, const T* sums, const T* x, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, count) { y[i] = x[i] - GroupMean(sums, i / dim, dim); }
}

// 1 / (sqrt(mean(z^2)) + eps), with std + eps in double as the CPU.
template <typename T>
__global__ void InverseStd(int64_t groups, int64_t dim, const T* sumsq, double eps, T* inv) {
  CREMA_CUDA_KERNEL_LOOP(g, groups) {
    inv[g] = static_cast<T>(1 / (sqrt(static_cast<double>(sumsq[g]) / dim) + eps));
  }
}

template <typename T>
__global__ void ScaleGroups(int64_t count, int64_t dim, const T* inv, T* y) {
  CREMA_CUDA_KERNEL_LOOP(i, count) { y[i] *= inv[i / dim]; }
}

// dx = dy - mean(dy), or (dy - mean(dy) - y mean(dy y)) / (std + eps) with inv set.
template <typename T>
__global__ void MVNBackward(int64_t count, int64_t groups, int64_t dim, const T* sums, const T* inv,
                            const T* y, const T* dy, T* dx) {
  CREMA_CUDA_KERNEL_LOOP(i, count) {
    const int64_t g = i / dim;
    const T mean_dy = GroupMean(sums, g, dim);
    if (inv == nullptr) {
      dx[i] = dy[i] - mean_dy;
    } else {
      const T mean_dy_y = GroupMean(sums + groups, g, dim);
      dx[i] = (dy[i] - mean_dy - y[i] * mean_dy_y) * inv[g];
    }
  }
}

}  // namespace

// In place, top and bottom share data and diff: every sum is taken before the element-wise pass
// that overwrites its inputs.
void MVNLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int64_t count = bottom[0]->count();
  if (count == 0) return;
  const MVNParameter& param = layer_param_.mvn_param();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    T* sums = sums_.mutable_gpu_data<T>();
    T* y = top[0]->mutable_gpu_data<T>();
    gpu::ReduceByAxis<T>(1, groups_, dim_, bottom[0]->gpu_data<T>(), nullptr, false, sums);
    SubtractMean<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, dim_, sums, bottom[0]->gpu_data<T>(), y);
    gpu::CheckLaunch("MVN forward (mean)");
    if (param.normalize_variance()) {
      T* inv = inv_std_.mutable_gpu_data<T>();
      gpu::ReduceByAxis<T>(1, groups_, dim_, y, y, false, sums);
      InverseStd<T><<<gpu::Blocks(groups_), gpu::kThreads, 0, gpu::Stream()>>>(groups_, dim_, sums,
                                                                               param.eps(), inv);
      ScaleGroups<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(count, dim_, inv, y);
      gpu::CheckLaunch("MVN forward (variance)");
    }
  });
}

void MVNLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  const int64_t count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const bool normalize_variance = layer_param_.mvn_param().normalize_variance();
  CREMA_DISPATCH_FLOAT(dtype(), T, {
    T* sums = sums_.mutable_gpu_data<T>();
    const T* y = top[0]->gpu_data<T>();
    const T* dy = top[0]->gpu_diff<T>();
    gpu::ReduceByAxis<T>(1, groups_, dim_, dy, nullptr, false, sums);
    if (normalize_variance) gpu::ReduceByAxis<T>(1, groups_, dim_, dy, y, false, sums + groups_);
    MVNBackward<T><<<gpu::Blocks(count), gpu::kThreads, 0, gpu::Stream()>>>(
        count, groups_, dim_, sums, normalize_variance ? inv_std_.gpu_data<T>() : nullptr, y, dy,
        bottom[0]->mutable_gpu_diff<T>());
    gpu::CheckLaunch("MVN backward");
  });
}

}  // namespace crema
