#pragma once
#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// One-vs-all hinge loss. For item n with label l_n and scores x_n (dim values):
//   m_nk = max(0, 1 + s_nk x_nk), s_nk = -1 for k = l_n and +1 otherwise,
//   loss = sum_nk m_nk / N (L1) or sum_nk m_nk^2 / N (L2).
// Shapes: bottom[0] scores (N x ...; dim = count / N classes), bottom[1] N labels in [0, dim);
// top[0] scalar.
// Backward: dx_nk = w / N * s_nk * [m_nk > 0] (L1), w / N * 2 s_nk m_nk (L2); no gradient to
// the labels.
// Params: hinge_loss_param { norm (L1 default, L2) }.
// A label outside [0, dim) is a RuntimeError.
class HingeLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "HingeLoss"; }
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

  Blob margins_;  // m_nk from Forward
  Blob scalars_;  // GPU: the margin sum and a bad-label flag, read back together

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
