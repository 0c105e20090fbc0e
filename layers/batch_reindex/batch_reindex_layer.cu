#include "layers/batch_reindex/batch_reindex_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// The kernels read bottom[1] on the device, truncated toward zero as Indices() reads it; the host
// has checked the values first (Indices() reads bottom[1], a batch-sized vector, back).
template <typename T, typename I>
__global__ void ReindexForward(int64_t n, int64_t inner, const I* index, const T* bottom, T* top) {
  CREMA_CUDA_KERNEL_LOOP(i, n) {
    top[i] = bottom[static_cast<int64_t>(index[i / inner]) * inner + i % inner];
  }
}

// One thread per bottom element: the sum, in the order of the indices, of the top items that
// picked its item (the CPU's zero-then-Axpy order).
template <typename T, typename I>
__global__ void ReindexBackward(int64_t n, int64_t inner, int64_t num_indices, const I* index,
                                const T* top_diff, T* bottom_diff) {
  CREMA_CUDA_KERNEL_LOOP(b, n) {
    const int64_t item = b / inner, offset = b % inner;
    T sum = T(0);
    for (int64_t k = 0; k < num_indices; ++k)
      if (static_cast<int64_t>(index[k]) == item) sum += top_diff[k * inner + offset];
    bottom_diff[b] = sum;
  }
}

}  // namespace

void BatchReindexLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  Indices(*bottom[1], bottom[0]->shape(0));
  const int64_t n = top[0]->count();
  if (n == 0) return;
  const int64_t inner = bottom[0]->count(1);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    CREMA_DISPATCH_FLOAT(bottom[1]->dtype(), I, {
      ReindexForward<T, I><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, inner, bottom[1]->gpu_data<I>(), bottom[0]->gpu_data<T>(),
          top[0]->mutable_gpu_data<T>());
    });
  });
  gpu::CheckLaunch("BatchReindex forward");
}

void BatchReindexLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  CREMA_CHECK_SHAPE(!propagate_down[1], "cannot backpropagate to bottom 1 (the indices)");
  if (!propagate_down[0]) return;
  Indices(*bottom[1], bottom[0]->shape(0));
  const int64_t n = bottom[0]->count();
  if (n == 0) return;
  const int64_t inner = bottom[0]->count(1);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    CREMA_DISPATCH_FLOAT(bottom[1]->dtype(), I, {
      ReindexBackward<T, I><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
          n, inner, bottom[1]->count(), bottom[1]->gpu_data<I>(), top[0]->gpu_diff<T>(),
          bottom[0]->mutable_gpu_diff<T>());
    });
  });
  gpu::CheckLaunch("BatchReindex backward");
}

}  // namespace crema
