#pragma once
#include "crema/layer.hpp"

namespace crema {

// Joins the bottoms along one axis: top = [bottom_0, bottom_1, ...] along concat axis a. Every
// bottom has the same number of axes and the same size on each axis except a; the top's size on a
// is the sum. Backward copies each bottom's slab of the top diff back. With one bottom the top
// shares the bottom's data and diff. Not in-place.
// Params: concat_param { axis (default 1, negative counts from the end) | legacy concat_dim
// (non-negative); not both }.
class ConcatLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Concat"; }
  // Along channels, each bottom's per-image slab is whole blocks in the blocked layout too.
  ChannelBlocking channel_blocking() const override {
    return concat_axis_ == 1 ? ChannelBlocking::kPassThrough : ChannelBlocking::kNone;
  }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool SupportsFusedReLUBackward() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, const std::vector<bool>& propagate_down, const BlobVec& bottom,
                const std::vector<float>& relu_slopes) const;

  int concat_axis_ = 1;
  int64_t num_concats_ = 0;        // product of the axes before the concat axis
  int64_t concat_input_size_ = 0;  // product of the axes after it

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
