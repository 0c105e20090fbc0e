#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// ShuffleNet's channel shuffle on bottom (N, C, ...): the channels are viewed as (group, C /
// group) and transposed, so top channel i * group + g is bottom channel g * (C / group) + i.
// Backward applies the inverse permutation to the diff. Shapes: top = bottom.
// Params: shuffle_channel_param { group (default 1, >= 1, must divide C) }. Not in-place.
class ShuffleChannelLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ShuffleChannel"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // Copies src to dst with channels moved: forward dst channel i * group + g <- src channel
  // g * (C / group) + i; inverse the other way.
  template <typename T>
  void Permute(const Blob& shape, const T* src, T* dst, bool inverse) const;

  int group_ = 1;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
