#include "layers/slice/slice_layer.hpp"
#include "math/math_gpu.hpp"

namespace crema {
namespace {

// Copies one top's piece out of the bottom (forward) or back into it (backward); `index` runs
// over the top.
template <typename T>
__global__ void SliceCopy(int64_t n, const T* in, bool forward, int64_t slice_size,
                          int64_t bottom_axis, int64_t top_axis, int64_t offset, T* out) {
  CREMA_CUDA_KERNEL_LOOP(index, n) {
    const int64_t slab = top_axis * slice_size;
    const int64_t slice_num = index / slab;
    const int64_t bottom_index = index % slab + (slice_num * bottom_axis + offset) * slice_size;
    if (forward)
      out[index] = in[bottom_index];
    else
      out[bottom_index] = in[index];
  }
}

}  // namespace

void SliceLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() == 1) return;  // shared
  const int64_t bottom_axis = bottom[0]->shape(slice_axis_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* bottom_data = bottom[0]->gpu_data<T>();
    int64_t offset = 0;
    for (Blob* t : top) {
      const int64_t top_axis = t->shape(slice_axis_);
      const int64_t n = t->count();
      if (n > 0) {
        SliceCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
            n, bottom_data, true, slice_size_, bottom_axis, top_axis, offset,
            t->mutable_gpu_data<T>());
        gpu::CheckLaunch("Slice forward");
      }
      offset += top_axis;
    }
  });
}

void SliceLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                             const BlobVec& bottom) {
  if (!propagate_down[0] || top.size() == 1) return;
  const int64_t bottom_axis = bottom[0]->shape(slice_axis_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* bottom_diff = bottom[0]->mutable_gpu_diff<T>();
    int64_t offset = 0;
    for (Blob* t : top) {
      const int64_t top_axis = t->shape(slice_axis_);
      const int64_t n = t->count();
      if (n > 0) {
        SliceCopy<T><<<gpu::Blocks(n), gpu::kThreads, 0, gpu::Stream()>>>(
            n, t->gpu_diff<T>(), false, slice_size_, bottom_axis, top_axis, offset, bottom_diff);
        gpu::CheckLaunch("Slice backward");
      }
      offset += top_axis;
    }
  });
}

}  // namespace crema
