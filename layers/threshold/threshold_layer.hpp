#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = 1 if x > threshold, else 0, as Caffe; any shape; in-place safe. Has no gradient: Backward
// with propagate_down is a ConfigError (Caffe: NOT_IMPLEMENTED), and force_backward does not
// reach its bottom. Params: threshold_param { threshold (default 0) }.
class ThresholdLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Threshold"; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  bool HasGradient() const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top) const;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
