#pragma once
#include "crema/layer.hpp"

namespace crema {

// Repeats the bottom `tiles` times along one axis: with the bottom viewed as
// (outer, inner) = (product of axes before axis, product of axes from axis on), the top is
// (outer, tiles * inner) with each inner block repeated, i.e. top shape = bottom shape with
// shape[axis] *= tiles. Backward sums the tiles' diffs.
// Params: tile_param { axis (default 1, negative counts from the end), tiles (> 0, required) }.
// Not in-place.
class TileLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Tile"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

  int tiles_ = 1;
  int64_t outer_dim_ = 0;
  int64_t inner_dim_ = 0;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
