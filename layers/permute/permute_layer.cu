#include "layers/permute/permute_layer.hpp"
#include "math/strided_gpu.hpp"

namespace crema {
namespace {

// Top element i (coordinates along the top's axes) reads bottom axis order[a] at coordinate i_a.
gpu::StridedMap PermuteMap(const Blob& top, const std::vector<int>& order,
                           const std::vector<int64_t>& old_steps) {
  std::vector<int64_t> shape(top.shape().begin(), top.shape().end());
  std::vector<int64_t> strides(order.size());
  for (size_t a = 0; a < order.size(); ++a) strides[a] = old_steps[order[a]];
  return gpu::MakeStridedMap(shape, strides);
}

}  // namespace

void PermuteLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const gpu::StridedMap map = PermuteMap(*top[0], order_, old_steps_);
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      gpu::GatherStrided<T>(count_, map, bottom[0]->gpu_data<T>(), top[0]->mutable_gpu_data<T>()));
}

void PermuteLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const gpu::StridedMap map = PermuteMap(*top[0], order_, old_steps_);
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      gpu::ScatterStrided<T>(count_, map, top[0]->gpu_diff<T>(), bottom[0]->mutable_gpu_diff<T>()));
}

}  // namespace crema
