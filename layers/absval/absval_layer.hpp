#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = |x|, as Caffe; any shape; not in-place (Caffe forbids it: Backward needs x).
// dy/dx = sign(x), with sign(0) = 0. No params.
class AbsValLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "AbsVal"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  bool AllowsInPlace() const override { return false; }

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
