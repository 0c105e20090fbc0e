#include "layers/concat/concat_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Copies one bottom's slabs into the top (forward) or back out of it (backward); `index` runs
// over the bottom.
template <typename T>
__global__ void ConcatCopy(int64_t n, const T* in, bool forward, int64_t concat_input_size,
                           int64_t top_axis, int64_t bottom_axis, int64_t offset, T* out) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int64_t slab = bottom_axis * concat_input_size;
    const int64_t concat_num = index / slab;
    const int64_t top_index = index % slab + (concat_num * top_axis + offset) * concat_input_size;
    if (forward)
      out[top_index] = in[index];
    else
      out[index] = in[top_index];
  }
}

}  // namespace

void ConcatLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;  // shared
  const int64_t top_axis = top[0]->shape(concat_axis_);
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    T* top_data = top[0]->mutable_gpu_data<T>();
    int64_t offset = 0;
    for (Blob* b : bottom) {
      const int64_t bottom_axis = b->shape(concat_axis_);
      const int64_t n = b->count();
      if (n > 0) {
        ConcatCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
            n, b->gpu_data<T>(), true, concat_input_size_, top_axis, bottom_axis, offset, top_data);
        gpu::CheckLaunch("Concat forward");
      }
      offset += bottom_axis;
    }
  });
}

void ConcatLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  if (bottom.size() == 1) return;  // shared
  const int64_t top_axis = top[0]->shape(concat_axis_);
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    const T* top_diff = top[0]->gpu_diff<T>();
    int64_t offset = 0;
    for (size_t i = 0; i < bottom.size(); ++i) {
      const int64_t bottom_axis = bottom[i]->shape(concat_axis_);
      const int64_t n = bottom[i]->count();
      if (propagate_down[i] && n > 0) {
        ConcatCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
            n, top_diff, false, concat_input_size_, top_axis, bottom_axis, offset,
            bottom[i]->mutable_gpu_diff<T>());
        gpu::CheckLaunch("Concat backward");
      }
      offset += bottom_axis;
    }
  });
}

}  // namespace crema
