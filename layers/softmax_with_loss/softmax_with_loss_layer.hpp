#pragma once
#include <memory>

#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Multinomial logistic loss of a softmax: p = softmax(x) along softmax_param.axis, then
// loss = -sum_{n, inner} log(max(p[n, label(n, inner), inner], FLT_MIN)) / normalizer over
// the items whose label is not loss_param.ignore_label.
// Shapes: bottom[0] scores (outer x C x inner), bottom[1] labels with outer * inner elements
// (integer values in [0, C)); top[0] scalar loss; optional top[1] = p (same shape as bottom[0]).
// Backward: dx = (p - onehot(label)) * loss_weight / normalizer, zero for ignored items; no
// gradient to the labels.
// Params: softmax_param { axis (default 1) }; loss_param { ignore_label, normalization
// (FULL: outer * inner, VALID (default): non-ignored count, BATCH_SIZE: outer, NONE: 1),
// legacy normalize (used only without normalization: true = VALID, false = BATCH_SIZE) }.
// A label outside [0, C) that is not the ignore label is a RuntimeError.
class SoftmaxWithLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "SoftmaxWithLoss"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // GPU: a label out of range, found by the Forward's kernel, is a RuntimeError here.
  void CheckForward(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void Backward(const BlobVec& top, const BlobVec& bottom);
  double Normalizer(int64_t valid_count) const;
  [[noreturn]] void BadLabel(int64_t index, double label) const;

  std::unique_ptr<Layer> softmax_layer_;
  Blob prob_;
  BlobVec softmax_bottom_;
  BlobVec softmax_top_;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  int axis_ = 1;
  int64_t outer_num_ = 0;
  int64_t inner_num_ = 0;
  // GPU: [0] 1 + the position of a label out of range, or 0; [1] the valid count.
  Blob device_scalars_{DataType::kFloat64};

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
