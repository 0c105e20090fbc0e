#pragma once
#include "crema/layer.hpp"

namespace crema {

// The net's inputs: no bottoms, one or more tops that the user fills before Forward (Forward
// and Backward do nothing). Shapes: input_param.shape given once (every top gets it), once per
// top, or not at all (the tops keep the shape they were given); Reshape does nothing after
// set-up, so a user may reshape the tops between passes.
// Params: input_param { repeated shape { dim ... } }.
class InputLayer final : public Layer {
 public:
  // Device-neutral: it only shares or zeroes memory, so the same code serves the GPU.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "Input"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override {}
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}
};

}  // namespace crema
