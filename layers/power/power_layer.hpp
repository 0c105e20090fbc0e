#pragma once
#include "crema/layer.hpp"
#include "crema/saved_input.hpp"

namespace crema {

// y = (shift + scale * x)^power, as Caffe; any shape; in-place safe (the bottom is copied when
// Backward needs it). dy/dx = power * scale * (shift + scale * x)^(power - 1); when
// power * scale == 0, y is constant (1 for power 0, else shift^power) and dy/dx = 0.
// Params: power_param { power (default 1), scale (default 1), shift (default 0) }.
class PowerLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Power"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  double power_ = 1, scale_ = 1, shift_ = 0;
  double diff_scale_ = 1;  // power * scale
  SavedInput input_;       // x, kept for Backward when running in place

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
