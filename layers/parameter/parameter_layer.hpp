#pragma once
#include "crema/layer.hpp"

namespace crema {

// A learnable blob as a layer output: no bottoms; one top that shares the data and diff of the
// layer's single learnable blob of shape parameter_param.shape (zero-initialised as Caffe; no
// filler), so the gradient reaching the top is the blob's gradient.
// Params: parameter_param { shape }. Loaded weights must have the shape's element count.
class ParameterLayer final : public Layer {
 public:
  // Device-neutral: it only shares the learnable blob's memory with its top.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "Parameter"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}
};

}  // namespace crema
