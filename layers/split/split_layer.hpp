#pragma once
#include "crema/layer.hpp"

namespace crema {

// Copies one bottom to N tops: every top shares the bottom's data; the bottom's gradient is the
// sum of the top diffs. Shapes: each top = bottom. No params. Not in-place (tops keep their own
// diffs). The net inserts Split layers where a blob feeds several layers.
class SplitLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Split"; }
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kPassThrough; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool SupportsFusedReLUBackward() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // relu_slope: the negative slope of the ReLU fused into this Backward, or null.
  template <typename T>
  void Backward(const BlobVec& top, Blob* bottom, const float* relu_slope) const;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
