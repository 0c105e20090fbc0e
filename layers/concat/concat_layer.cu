#include "layers/concat/concat_layer.hpp"
#include "math/strided_gpu.hpp"

namespace crema {

void ConcatLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  if (bottom.size() == 1) return;  // shared
  const int64_t top_axis = top[0]->shape(concat_axis_);
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, {
    T* top_data = top[0]->mutable_gpu_data<T>();
    int64_t offset = 0;
    for (Blob* b : bottom) {
      const int64_t bottom_axis = b->shape(concat_axis_);
      gpu::CopySlabs<T>(num_concats_, bottom_axis * concat_input_size_, b->gpu_data<T>(),
                        bottom_axis * concat_input_size_, top_data + offset * concat_input_size_,
                        top_axis * concat_input_size_);
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
      if (propagate_down[i])
        gpu::CopySlabs<T>(num_concats_, bottom_axis * concat_input_size_,
                          top_diff + offset * concat_input_size_, top_axis * concat_input_size_,
                          bottom[i]->mutable_gpu_diff<T>(), bottom_axis * concat_input_size_);
      offset += bottom_axis;
    }
  });
}

}  // namespace crema
