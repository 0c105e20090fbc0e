#include "layers/slice/slice_layer.hpp"
#include "math/strided_gpu.hpp"

namespace crema {

void SliceLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (top.size() == 1) return;  // shared
  const int64_t bottom_axis = bottom[0]->shape(slice_axis_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    const T* bottom_data = bottom[0]->gpu_data<T>();
    int64_t offset = 0;
    for (Blob* t : top) {
      const int64_t top_axis = t->shape(slice_axis_);
      gpu::CopySlabs<T>(num_slices_, top_axis * slice_size_,
                        bottom_data + offset * slice_size_, bottom_axis * slice_size_,
                        t->mutable_gpu_data<T>(), top_axis * slice_size_);
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
      gpu::CopySlabs<T>(num_slices_, top_axis * slice_size_, t->gpu_diff<T>(),
                        top_axis * slice_size_, bottom_diff + offset * slice_size_,
                        bottom_axis * slice_size_);
      offset += top_axis;
    }
  });
}

}  // namespace crema
