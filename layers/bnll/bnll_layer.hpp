#pragma once
#include "crema/layer.hpp"

namespace crema {

// Binomial normal log likelihood (softplus), as Caffe: y = log(1 + exp(x)), computed as
// x + log(1 + exp(-x)) for x > 0; any shape; in-place safe.
// dy/dx = sigmoid(x) = 1 - exp(-y); taking it from y keeps in-place use correct (Caffe's reads
// the bottom, which in place already holds y). No params.
class BNLLLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "BNLL"; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top) const;
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom) const;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
