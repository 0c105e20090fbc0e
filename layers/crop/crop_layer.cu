#include "layers/crop/crop_layer.hpp"
#include "math/math_gpu.hpp"
#include "math/strided_gpu.hpp"

namespace crema {
namespace {

// Top element i sits at the same coordinates, shifted by the offsets, in bottom[0].
gpu::StridedMap WindowMap(const Blob& big, const Blob& small, const std::vector<int>& offsets) {
  const std::vector<int64_t> strides = gpu::RowMajorStrides(big.shape());
  std::vector<int64_t> shape(small.shape().begin(), small.shape().end());
  int64_t base = 0;
  for (size_t a = 0; a < strides.size(); ++a) base += offsets[a] * strides[a];
  return gpu::MakeStridedMap(shape, strides, base);
}

}  // namespace

void CropLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const gpu::StridedMap map = WindowMap(*bottom[0], *top[0], offsets_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu::GatherStrided<T>(top[0]->count(), map, bottom[0]->gpu_data<T>(),
                                             top[0]->mutable_gpu_data<T>()));
}

void CropLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const gpu::StridedMap map = WindowMap(*bottom[0], *top[0], offsets_);
  // bottom[1] only gives a shape; its diff reads as zero, as on the CPU.
  if (propagate_down[1]) bottom[1]->SetDiffZero();
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, {
    T* bottom_diff = bottom[0]->mutable_gpu_diff<T>();
    gpu::Set<T>(bottom[0]->count(), T(0), bottom_diff);
    gpu::ScatterStrided<T>(top[0]->count(), map, top[0]->gpu_diff<T>(), bottom_diff);
  });
}

}  // namespace crema
