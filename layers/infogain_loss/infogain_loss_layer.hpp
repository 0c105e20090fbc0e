#pragma once
#include <memory>

#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Infogain loss of a softmax (Caffe's current form): p = softmax(x) along
// infogain_loss_param.axis (C classes), then
//   loss = -sum_{n, inner} sum_k H[l, k] log(max(p[n, k, inner], 1e-20)) / normalizer,
// with l = label(n, inner), over the items whose label is not loss_param.ignore_label.
// H = identity gives SoftmaxWithLoss (up to the clamp).
// Shapes: bottom[0] scores (outer x C x inner), bottom[1] outer * inner labels in [0, C),
// optional bottom[2] H (C * C values, row l = weights for label l); top[0] scalar loss, optional
// top[1] = p.
// Backward: dx[n, k, inner] = (p[n, k, inner] * sum_j H[l, j] - H[l, k]) * w / normalizer, zero
// for ignored items; no gradient to the labels or to H.
// Params: infogain_loss_param { source (binaryproto with H, required without bottom[2]),
// axis (default 1) }; loss_param { ignore_label, normalization (default VALID) }; the legacy
// loss_param.normalize is rejected, as Caffe does for this layer.
// A label outside [0, C) that is not the ignore label is a RuntimeError.
class InfogainLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "InfogainLoss"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return -1; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // Neither the labels nor H get a gradient (Caffe allows forcing H, then aborts in Backward).
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

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
  int Label(double value, int64_t index) const;
  const Blob& Infogain(const BlobVec& bottom) const {
    return bottom.size() >= 3 ? *bottom[2] : infogain_;
  }

  std::unique_ptr<Layer> softmax_layer_;
  Blob prob_;
  Blob infogain_;  // H read from infogain_loss_param.source
  BlobVec softmax_bottom_;
  BlobVec softmax_top_;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  int axis_ = 1;
  int64_t outer_num_ = 0;
  int64_t inner_num_ = 0;
  int num_labels_ = 0;
  // GPU scratch: per-item losses and counts (double, as the CPU sums), their sums and a
  // bad-label flag, and the row sums of H.
  Blob losses_{DataType::kFloat64};
  Blob counts_{DataType::kFloat64};
  Blob sums_{DataType::kFloat64};
  Blob row_sums_;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
