#include <algorithm>

#include "layers/filter/filter_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Selected item k (top) <-> item index[k] (bottom), `dim` elements each; forward gathers into the
// top, backward scatters into the (zeroed) bottom diff. The indices are distinct, so no two
// threads write one element.
template <typename T>
__global__ void FilterCopy(int64_t n, int64_t dim, const double* index, bool to_top, const T* src,
                           T* dst) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    const int64_t item = static_cast<int64_t>(index[i / dim]) * dim + i % dim;
    if (to_top)
      dst[i] = src[item];
    else
      dst[item] = src[i];
  }
}

}  // namespace

const double* FilterLayer::GpuIndices() {
  if (indices_to_forward_ != uploaded_ || gpu_indices_.count() == 0) {
    uploaded_ = indices_to_forward_;
    gpu_indices_.Reshape({std::max<int>(1, static_cast<int>(uploaded_.size()))});
    std::copy(uploaded_.begin(), uploaded_.end(), gpu_indices_.mutable_cpu_data<double>());
  }
  return gpu_indices_.gpu_data<double>();
}

void FilterLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const double* index = GpuIndices();
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    for (size_t t = 0; t < top.size(); ++t) {
      const int64_t dim = bottom[t]->count(1);
      const int64_t n = static_cast<int64_t>(indices_to_forward_.size()) * dim;
      if (n == 0) continue;
      FilterCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, dim, index, true, bottom[t]->gpu_data<T>(), top[t]->mutable_gpu_data<T>());
      gpu::CheckLaunch("Filter forward");
    }
  });
}

void FilterLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down.back(), "cannot backpropagate to the selector (last bottom)");
  const double* index = GpuIndices();
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    for (size_t t = 0; t < top.size(); ++t) {
      if (!propagate_down[t]) continue;
      const int64_t dim = bottom[t]->count(1);
      T* bottom_diff = bottom[t]->mutable_gpu_diff<T>();
      gpu::Set<T>(bottom[t]->count(), T(0), bottom_diff);
      const int64_t n = static_cast<int64_t>(indices_to_forward_.size()) * dim;
      if (n == 0) continue;
      FilterCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, dim, index, false, top[t]->gpu_diff<T>(), bottom_diff);
      gpu::CheckLaunch("Filter backward");
    }
  });
}

}  // namespace crema
