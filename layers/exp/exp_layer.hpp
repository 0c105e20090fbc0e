#pragma once
#include "crema/layer.hpp"

namespace crema {

// y = base^(shift + scale * x), as Caffe; base -1 means e; any shape; in-place safe.
// dy/dx = y * scale * ln(base).
// Params: exp_param { base (default -1 = e; else > 0), scale (default 1), shift (default 0) }.
class ExpLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Exp"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top) const;
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom) const;

  double inner_scale_ = 1;  // scale * ln(base)
  double outer_scale_ = 1;  // base^shift

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
