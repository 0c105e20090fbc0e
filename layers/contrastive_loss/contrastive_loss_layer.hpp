#pragma once
#include "core/host_device.hpp"
#include "crema/layer.hpp"

namespace crema {

// Contrastive loss over pairs (a_n, b_n) with similarity y_n (1 similar, 0 dissimilar):
//   d_n^2 = ||a_n - b_n||^2,
//   loss = 1 / (2N) * sum_n [ y_n d_n^2 + (1 - y_n) max(margin - d_n, 0)^2 ],
// or with legacy_version the dissimilar term max(margin - d_n^2, 0).
// y_n is read as int(value) != 0.
// Shapes: bottom[0] a and bottom[1] b (N x C, or N x C x 1 x 1), bottom[2] y (N, or
// N x 1 x 1 x 1); top[0] scalar.
// Backward (db = -da): similar pairs da = w / N * (a - b); dissimilar pairs with a positive
// margin term da = -w / N * (margin - d) / (d + 1e-4) * (a - b) (legacy: -w / N * (a - b)), and
// zero otherwise. The 1e-4 is Caffe's guard against d = 0. No gradient to y.
// Params: contrastive_loss_param { margin (default 1), legacy_version (default false) }.
class ContrastiveLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "ContrastiveLoss"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 3; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

  // The factor of (a - b) in the gradient of a dissimilar pair, given alpha = +-w / N, d^2 and
  // d = sqrt(d^2): -alpha (legacy) or -alpha (margin - d) / (d + 1e-4) where the pair's term is
  // positive, else 0. One definition for the CPU and the GPU code.
  template <typename T>
  static CREMA_HOST_DEVICE inline T DissimilarFactor(T alpha, T margin, T dist_sq, T dist,
                                                     bool legacy) {
    const T gap = legacy ? margin - dist_sq : margin - dist;
    if (!(gap > 0)) return T(0);
    return legacy ? -alpha : -alpha * gap / (dist + T(1e-4));
  }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  // Throws when a gradient is asked of the similarities.
  void CheckPropagateDown(const std::vector<bool>& propagate_down) const;
  template <typename T>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  Blob diff_;     // a - b
  Blob dist_sq_;  // d_n^2
  Blob terms_;    // GPU: the loss term of each pair, then their sum

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
