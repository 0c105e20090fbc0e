#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Mean-variance normalisation, as Caffe. Bottom (N, C, ...); top the same shape. Each group of
// D values — one (n, c) plane, or all of sample n with across_channels — is normalised:
//   z = x - mean(x);  y = z / (sqrt(mean(z^2)) + eps)   (normalize_variance; else y = z).
// Caffe adds eps to the standard deviation, not the variance. Backward, per group:
//   dx = (dy - mean(dy) - y * mean(dy * y)) / (std + eps)   (normalize_variance)
//   dx = dy - mean(dy)                                       (otherwise)
// The first is Caffe's formula: it treats std + eps as std, which is the exact gradient only for
// eps = 0 (the default 1e-9 makes the difference negligible). In-place safe.
// Params: mvn_param { normalize_variance (true), across_channels (false), eps (1e-9) }.
class MVNLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "MVN"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  int64_t groups_ = 0;
  int64_t dim_ = 0;
  // Per group, from the last Forward: std + eps.
  std::vector<double> std_eps_;
  // GPU: per group, two sums (rows 0 and 1) and 1 / (std + eps).
  Blob sums_;
  Blob inv_std_;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
