#pragma once
#include <memory>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Spatial pyramid pooling, as Caffe. Bottom (N, C, H, W). Level l = 0 .. pyramid_height - 1
// pools the image into about 2^l x 2^l bins with a Pooling layer of kernel k = ceil(H / 2^l),
// stride k, pad ((k * 2^l - H) + 1) / 2 (likewise for W; Pooling's ceil rounding and clipping
// apply, and pad must stay below k). Top, as Caffe's Split + Pooling + Flatten + Concat:
//   pyramid_height 1:  (N, C, 1, 1), the level-0 (global) pooling itself;
//   pyramid_height > 1: (N, sum over l of C * ph_l * pw_l), row n = the levels one after another,
//   each flattened as (c, h, w); with the bins as planned that is N x (C * sum 4^l).
// Backward: the sum over levels of each Pooling's gradient. Not in-place.
// Params: spp_param { pyramid_height (>= 1), pool (MAX, AVE or STOCHASTIC) }.
class SPPLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "SPP"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const BlobVec& bottom);

  int pyramid_height_ = 0;
  std::vector<int> bottom_shape_;  // the shape the pooling layers were built for
  std::vector<std::unique_ptr<Layer>> pooling_layers_;
  std::vector<std::unique_ptr<Blob>> pooled_;  // one top per level
  std::vector<int64_t> offsets_;               // each level's first column in a top row
  int64_t row_ = 0;                            // top values per image
  Blob level_bottom_;  // shares bottom's data; receives one level's gradient

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
