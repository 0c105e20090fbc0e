#include "layers/shuffle_channel/shuffle_channel_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void ShuffleChannelLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const uint32_t group = layer_param_.shuffle_channel_param().group();
  CREMA_CHECK_PARAM(group >= 1, "shuffle_channel_param.group", "must be >= 1, got ", group);
  CREMA_CHECK_PARAM(group <= INT32_MAX, "shuffle_channel_param.group", "is too large: ", group);
  group_ = static_cast<int>(group);
}

void ShuffleChannelLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "ShuffleChannel does not allow in-place computation");
  const Blob& in = *bottom[0];
  CREMA_CHECK_SHAPE(in.num_axes() >= 2, "ShuffleChannel needs a bottom (N, C, ...), got ",
                    in.shape_string());
  const int channels = in.shape(1);
  CREMA_CHECK_PARAM(channels % group_ == 0, "shuffle_channel_param.group",
                    "must divide the channels: ", channels, " channels (bottom ", in.shape_string(),
                    ") are not divisible by group ", group_);
  top[0]->ReshapeLike(in);
}

template <typename T>
void ShuffleChannelLayer::Permute(const Blob& shape, const T* src, T* dst, bool inverse) const {
  const int64_t num = shape.shape(0);
  const int channels = shape.shape(1);
  const int per_group = channels / group_;
  const int64_t plane = shape.count(2);
  // Output (forward) channel c = i * group + g reads input channel g * per_group + i.
#pragma omp parallel for if (num * channels * plane > 262144)
  for (int64_t nc = 0; nc < num * channels; ++nc) {
    const int64_t n = nc / channels;
    const int c = static_cast<int>(nc % channels);
    const int i = c / group_, g = c % group_;
    const int64_t shuffled = (n * channels + c) * plane;
    const int64_t original = (n * channels + g * per_group + i) * plane;
    if (inverse)
      std::copy(src + shuffled, src + shuffled + plane, dst + original);
    else
      std::copy(src + original, src + original + plane, dst + shuffled);
  }
}

void ShuffleChannelLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      Permute<T>(*bottom[0], bottom[0]->cpu_data<T>(), top[0]->mutable_cpu_data<T>(), false));
}

void ShuffleChannelLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                      const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(
      bottom[0]->dtype(), T,
      Permute<T>(*bottom[0], top[0]->cpu_diff<T>(), bottom[0]->mutable_cpu_diff<T>(), true));
}

CREMA_REGISTER_LAYER(ShuffleChannel, ShuffleChannelLayer);

}  // namespace crema
