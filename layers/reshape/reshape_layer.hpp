#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Gives the bottom a new shape without copying: the top shares the bottom's data and diff.
// The axes [axis, axis + num_axes) of the bottom are replaced by reshape_param.shape, whose dims
// mean: d > 0 that size, 0 copy the bottom's size at the same position (axis + i), -1 infer
// from the element count (at most one). The element count must not change.
// E.g. (2, 3, 4, 5) with shape { dim: 0 dim: -1 } -> (2, 60); with axis: 1 num_axes: 1 and
// shape { dim: 3 dim: 1 } -> (2, 3, 1, 4, 5).
// Params: reshape_param { shape, axis (default 0; negative: -1 is the end, so -1 appends),
// num_axes (default -1 = to the end) }. Not in-place.
class ReshapeLayer final : public Layer {
 public:
  // Device-neutral: it only shares or zeroes memory, so the same code serves the GPU.
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "Reshape"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override {}
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  std::vector<int> copy_axes_;  // positions in shape with dim 0
  int inferred_axis_ = -1;      // position in shape with dim -1, or -1
  int64_t constant_count_ = 1;  // product of the given positive dims

 public:
  // Forward and Backward only share memory (on the host, no kernels).
  bool SupportsGraphCapture() const override { return true; }
};

}  // namespace crema
