#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = min(max(x, 0), 6) (crema; MobileNet's clipped ReLU); any shape; in-place safe.
// dy/dx = 1 for 0 < x < 6, else 0 (0 at both kinks, as ReLU at 0), read from y. No params.
class ReLU6Layer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU6"; }

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
