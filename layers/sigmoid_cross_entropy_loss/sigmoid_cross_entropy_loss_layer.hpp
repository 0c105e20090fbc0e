#pragma once
#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Cross-entropy of sigmoid(x) against targets t in [0, 1], element by element, in Caffe's
// numerically stable form:
//   loss = -sum_i [x_i (t_i - [x_i >= 0]) - log(1 + exp(x_i - 2 x_i [x_i >= 0]))] / normalizer
// over the elements whose int(t_i) is not loss_param.ignore_label.
// Shapes: bottom[0] x (N x ...), bottom[1] t with the same count; top[0] scalar.
// Backward: dx = (sigmoid(x) - t) * loss_weight / normalizer, zero for ignored elements; no
// gradient to the targets.
// Params: loss_param { ignore_label, normalization (FULL: count, VALID: non-ignored count,
// BATCH_SIZE: N, NONE: 1; default BATCH_SIZE when unset, as Caffe), legacy normalize (used only
// without normalization: true = VALID, false = BATCH_SIZE) }. The normalizer is at least 1.
class SigmoidCrossEntropyLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  // Throws for a gradient asked of an input that has none; whether bottom[0] wants one.
  bool WantsGradient(const std::vector<bool>& propagate_down) const;
  template <typename T>
  void Backward(const BlobVec& top, const BlobVec& bottom);
  double Normalizer(int64_t valid_count) const;

  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::BATCH_SIZE;
  int64_t outer_num_ = 0;
  int64_t inner_num_ = 0;
  double normalizer_ = 1;  // from the last Forward, used by Backward (as Caffe)
  // GPU scratch, in double as the CPU sums: per-element losses and counts, then their sums.
  Blob losses_{DataType::kFloat64};
  Blob counts_{DataType::kFloat64};
  Blob sums_{DataType::kFloat64};

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
