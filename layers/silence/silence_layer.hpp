#pragma once
#include "crema/layer.hpp"

namespace crema {

// Consumes any number of bottoms so that they count as used; no tops, no computation.
// Backward sets the diff of every bottom that takes a gradient to zero. No params.
class SilenceLayer final : public Layer {
 public:
  // Device-neutral: it only shares or zeroes memory, so the same code serves the GPU.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "Silence"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 0; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override {}
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;
};

}  // namespace crema
