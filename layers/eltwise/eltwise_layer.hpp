#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Element-wise combination of two or more bottoms of the same shape into one top of that shape:
//   PROD: y = x_0 * x_1 * ...;  dy/dx_i = product of the other bottoms (stable_prod_grad: true),
//         or y / x_i (stable_prod_grad: false, as Caffe; undefined where x_i = 0);
//   SUM:  y = sum_i c_i x_i;     dy/dx_i = c_i (c_i = coeff[i], default 1);
//   MAX:  y = max_i x_i;         the gradient goes to the first bottom attaining the maximum
//         (ties between bottoms 0 and 1 go to bottom 1, as Caffe), kept as an argmax mask.
// Params: eltwise_param { operation (PROD | SUM (default) | MAX), coeff (repeated: none or one
// per bottom; SUM only), stable_prod_grad (default true) }. Not in-place.
class EltwiseLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Eltwise"; }
  bool SupportsFusedReLU() const override { return true; }
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kPassThrough; }
  // SUM of ones reads each element of every bottom before writing it (CPU and GPU).
  bool AllowsInPlaceOnFirstBottom() const override;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, Blob* top);
  // SUM with every coefficient 1: top = 0 + x_0 + x_1 + ... (+ the fused ReLU).
  template <typename T>
  void SumOfOnes(const BlobVec& bottom, T* top_data, int64_t count) const;
  template <typename T>
  void Backward(const Blob& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  std::vector<double> coeffs_;
  bool stable_prod_grad_ = true;
  std::vector<int> max_idx_;  // MAX: the bottom that won, per element
  // GPU MAX: the bottom that won, per element, as exact small integers in the element type.
  Blob max_idx_gpu_;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
