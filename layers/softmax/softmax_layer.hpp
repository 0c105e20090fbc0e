#pragma once
#include "crema/layer.hpp"

namespace crema {

// y_c = exp(x_c - max_k x_k) / sum_k exp(x_k - max_k x_k) along `axis`, for every position of
// the other axes. Shapes: top = bottom. Backward: dx = (dy - sum_k dy_k y_k) * y.
// In-place safe. Params: softmax_param { axis (default 1; negative counts from the end) }.
class SoftmaxLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Softmax"; }
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
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

  int axis_ = 1;
  int64_t outer_num_ = 0;  // product of the axes before `axis`
  int64_t channels_ = 0;   // size of `axis`
  int64_t inner_num_ = 0;  // product of the axes after `axis`

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
