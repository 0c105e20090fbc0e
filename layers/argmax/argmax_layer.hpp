#pragma once
#include "crema/layer.hpp"

namespace crema {

// The indices (and optionally the values) of the top_k largest entries, sorted by decreasing
// value (ties: the larger index first, as Caffe).
// Without axis: per item n of the batch (axis 0) over its count(1) values; top shape
// (N, 1, top_k), or (N, 2, top_k) with out_max_val where [n][0] holds the indices and [n][1]
// the values (bottoms of fewer than 3 axes still give a 3-axis top).
// With axis: along that axis; top shape = the bottom's with shape[axis] = top_k, holding the
// indices, or the values instead when out_max_val.
// Params: argmax_param { out_max_val (default false), top_k (default 1, >= 1 and at most the
// searched size), axis (optional, negative counts from the end) }. No gradient: Backward to the
// bottom is an error (AllowForceBackward false). Not in-place.
class ArgMaxLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ArgMax"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  bool HasGradient() const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;

  bool out_max_val_ = false;
  int top_k_ = 1;
  bool has_axis_ = false;
  int axis_ = 0;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
