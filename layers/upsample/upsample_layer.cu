#include "layers/upsample/upsample_layer.hpp"

namespace crema {

// The CPU's tap tables (Taps) on the device; the kernels mirror cpu::ResizeForward/Backward.
void UpsampleLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int axes = bottom[0]->num_axes();
  const int in_h = bottom[0]->shape(axes - 2), in_w = bottom[0]->shape(axes - 1);
  gpu_table_.Set(Taps(in_h, top[0]->shape(axes - 2)), Taps(in_w, top[0]->shape(axes - 1)), in_h,
                 in_w);
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      gpu_table_.Forward<T>(bottom[0]->gpu_data<T>(), bottom[0]->count(0, axes - 2), bilinear_,
                            top[0]->mutable_gpu_data<T>()));
}

void UpsampleLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const int axes = bottom[0]->num_axes();
  const int in_h = bottom[0]->shape(axes - 2), in_w = bottom[0]->shape(axes - 1);
  gpu_table_.Set(Taps(in_h, top[0]->shape(axes - 2)), Taps(in_w, top[0]->shape(axes - 1)), in_h,
                 in_w);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu_table_.Backward<T>(top[0]->gpu_diff<T>(), bottom[0]->count(0, axes - 2),
                                              bilinear_, bottom[0]->mutable_gpu_diff<T>()));
}

}  // namespace crema
