#pragma once
#include "crema/layer.hpp"

namespace crema {

// loss = 1 / (2 N) * sum_n ||a_n - b_n||^2, with N = bottom[0]->shape(0).
// Shapes: bottom[0] a and bottom[1] b, same first axis and the same count per item (shapes may
// differ otherwise, as in Caffe); top[0] scalar.
// Backward: da = w / N * (a - b), db = -w / N * (a - b) (w = loss weight); both bottoms may
// receive a gradient (e.g. regressing two learned outputs onto each other).
// Params: none beyond loss_weight.
class EuclideanLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "EuclideanLoss"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  bool AllowForceBackward(int bottom_index) const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  Blob diff_;  // a - b

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
