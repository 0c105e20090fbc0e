#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = max(0, x) + negative_slope * min(0, x), element-wise; any shape; in-place safe.
// dy/dx = 1 for x > 0, negative_slope for x <= 0 (Caffe's choice at 0).
// Params: relu_param { negative_slope (default 0) }.
class ReLULayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU"; }
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kPassThrough; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
