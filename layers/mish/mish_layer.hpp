#pragma once
#include "crema/layer.hpp"
#include "crema/saved_input.hpp"

namespace crema {

// Mish (crema): y = x * tanh(softplus(x)), softplus(x) = log(1 + exp(x)); any shape; in-place
// safe (the bottom is copied). With t = tanh(softplus(x)):
// dy/dx = t + x * sigmoid(x) * (1 - t^2). No params.
class MishLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Mish"; }
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

  SavedInput input_;  // x, kept for Backward when running in place

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
