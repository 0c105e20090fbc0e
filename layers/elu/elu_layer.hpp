#pragma once
#include "crema/layer.hpp"

namespace crema {

// Exponential linear unit, as Caffe: y = x for x > 0, alpha * (exp(x) - 1) for x <= 0; any
// shape; in-place safe (for alpha >= 0, as Caffe, Backward reads the top).
// dy/dx = 1 for x > 0, alpha + y for x <= 0.
// Params: elu_param { alpha (default 1) }.
class ELULayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ELU"; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top) const;
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom) const;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
