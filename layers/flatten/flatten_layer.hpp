#pragma once
#include "crema/layer.hpp"

namespace crema {

// Merges the axes axis .. end_axis (inclusive) of the bottom into one; the data and diff are
// shared, not copied. Shapes: (d0, .., d_axis * .. * d_end_axis, .., dn). E.g. the defaults map
// N x C x H x W to N x CHW. Not in-place.
// Params: flatten_param { axis (default 1), end_axis (default -1); negative counts from the end }.
class FlattenLayer final : public Layer {
 public:
  // Device-neutral: it only shares or zeroes memory, so the same code serves the GPU.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "Flatten"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 public:
  // Forward and Backward only share memory (on the host, no kernels).
  bool SupportsGraphCapture() const override { return true; }
};

}  // namespace crema
