#pragma once
#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Negative log-likelihood of given probabilities (e.g. a Softmax output):
//   loss = -1/N * sum_n log(max(p[n, l_n], 1e-20)),
// with Caffe's kLOG_THRESHOLD clamp (1e-20).
// Shapes: bottom[0] p (N x ...; dim = count / N classes), bottom[1] N labels in [0, dim)
// (N, or N x 1 x 1 x 1); top[0] scalar.
// Backward: dp[n, l_n] = -w / N / max(p[n, l_n], 1e-20), zero elsewhere; no gradient to the
// labels.
// Params: none beyond loss_weight. A label outside [0, dim) is a RuntimeError.
class MultinomialLogisticLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "MultinomialLogisticLoss"; }
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
  int Label(double value, int64_t index, int64_t dim) const;

  // GPU scratch, in double as the CPU sums: per-item losses, then their sum and a bad-label flag.
  Blob losses_{DataType::kFloat64};
  Blob scalars_{DataType::kFloat64};

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
