#include "layers/interp/interp_layer.hpp"

namespace crema {

// The CPU's tap tables (Taps) on the device; the kernels mirror cpu::ResizeForward/Backward.
void InterpLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const int axes = bottom[0]->num_axes();
  const int in_h = bottom[0]->shape(axes - 2), in_w = bottom[0]->shape(axes - 1);
  gpu_table_.Set(Taps(-pad_beg_, in_h + pad_beg_ + pad_end_, top[0]->shape(axes - 2)),
                 Taps(-pad_beg_, in_w + pad_beg_ + pad_end_, top[0]->shape(axes - 1)), in_h, in_w);
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      gpu_table_.Forward<T>(bottom[0]->gpu_data<T>(), bottom[0]->count(0, axes - 2), true,
                            top[0]->mutable_gpu_data<T>()));
}

void InterpLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                              const BlobVec& bottom) {
  // bottom[1] only gives a size; its diff reads as zero.
  if (bottom.size() > 1 && propagate_down[1]) bottom[1]->SetDiffZero();
  if (!propagate_down[0]) return;
  const int axes = bottom[0]->num_axes();
  const int in_h = bottom[0]->shape(axes - 2), in_w = bottom[0]->shape(axes - 1);
  gpu_table_.Set(Taps(-pad_beg_, in_h + pad_beg_ + pad_end_, top[0]->shape(axes - 2)),
                 Taps(-pad_beg_, in_w + pad_beg_ + pad_end_, top[0]->shape(axes - 1)), in_h, in_w);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu_table_.Backward<T>(top[0]->gpu_diff<T>(), bottom[0]->count(0, axes - 2),
                                              true, bottom[0]->mutable_gpu_diff<T>()));
}

}  // namespace crema
