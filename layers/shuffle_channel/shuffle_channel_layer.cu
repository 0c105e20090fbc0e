#include "layers/shuffle_channel/shuffle_channel_layer.hpp"
#include "math/strided_gpu.hpp"

namespace crema {
namespace {

// The top, viewed as (N, C / group, group, plane): top channel i * group + g reads bottom channel
// g * (C / group) + i.
gpu::StridedMap ShuffleMap(const Blob& bottom, int group) {
  const int64_t channels = bottom.shape(1), plane = bottom.count(2);
  const int64_t per_group = channels / group;
  return gpu::MakeStridedMap({bottom.shape(0), per_group, group, plane},
                             {channels * plane, plane, per_group * plane, 1});
}

}  // namespace

void ShuffleChannelLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  const gpu::StridedMap map = ShuffleMap(*bottom[0], group_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu::GatherStrided<T>(bottom[0]->count(), map, bottom[0]->gpu_data<T>(),
                                             top[0]->mutable_gpu_data<T>()));
}

void ShuffleChannelLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  const gpu::StridedMap map = ShuffleMap(*bottom[0], group_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       gpu::ScatterStrided<T>(bottom[0]->count(), map, top[0]->gpu_diff<T>(),
                                              bottom[0]->mutable_gpu_diff<T>()));
}

}  // namespace crema
