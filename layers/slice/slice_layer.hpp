#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Cuts the bottom along one axis into consecutive pieces, one per top: with slice points
// p_1 < ... < p_{T-1}, top t holds indices [p_t, p_{t+1}) of the slice axis (p_0 = 0,
// p_T = the axis size); without slice points the axis is split into T equal pieces (it must be
// divisible by T). Backward copies each top diff back into its piece. With one top the top shares
// the bottom's data and diff. Not in-place.
// Params: slice_param { axis (default 1, negative counts from the end) | legacy slice_dim
// (non-negative); not both; slice_point (repeated, T - 1 values or none) }.
class SliceLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Slice"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, const BlobVec& top) const;
  template <typename T>
  void Backward(const BlobVec& top, Blob* bottom) const;

  int slice_axis_ = 1;
  int64_t num_slices_ = 0;  // product of the axes before the slice axis
  int64_t slice_size_ = 0;  // product of the axes after it

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
