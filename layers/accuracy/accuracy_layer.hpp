#pragma once
#include <vector>

#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Top-k classification accuracy: an item (n, inner) counts as correct when fewer than top_k
// classes score >= the score of its true class (ties count against it, as in Caffe).
// top[0] = correct / counted items (0 when none), items whose label is ignore_label skipped.
// Shapes: bottom[0] scores (outer x C x inner along `axis`), bottom[1] labels with
// outer * inner elements, values in [0, C); top[0] scalar; optional top[1] of shape (C): the
// accuracy per true class (0 for classes that do not occur).
// Params: accuracy_param { top_k (default 1), axis (default 1), ignore_label }.
// No gradient: a loss_weight on a top is a ConfigError at set-up, and Backward with
// propagate_down set is one too (Caffe's NOT_IMPLEMENTED aborts).
// A label outside [0, C) that is not the ignore label is a RuntimeError.
class AccuracyLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Accuracy"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  bool HasGradient() const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);

  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int axis_ = 1;
  int64_t outer_num_ = 0;
  int64_t inner_num_ = 0;
  std::vector<int64_t> class_counts_;  // items per true class (for top[1])
  // GPU scratch (double: exact counts): per item whether it is correct and whether it counts,
  // then the correct and counted totals and a bad-label flag.
  Blob correct_{DataType::kFloat64};
  Blob counted_{DataType::kFloat64};
  Blob sums_{DataType::kFloat64};

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
