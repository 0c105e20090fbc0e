#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = 1 / (1 + exp(-x)), computed as Caffe does: 0.5 * tanh(0.5 * x) + 0.5; any shape; in-place
// safe. dy/dx = y * (1 - y). No params.
class SigmoidLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Sigmoid"; }

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
