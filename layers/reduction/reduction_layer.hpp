#pragma once
#include "crema/layer.hpp"

namespace crema {

// Reduces all axes from `axis` on: with the bottom viewed as (num, dim) = (product of axes before
// axis, product of the rest), top[n] = coeff * f(bottom[n, :]) where f is
//   SUM: sum x;  ASUM: sum |x|;  SUMSQ: sum x^2;  MEAN: sum x / dim.
// Top shape = the bottom's axes before axis (a scalar for axis 0). Backward:
// dx = coeff * dy * (1, sign(x) (0 at 0), 2x, 1 / dim). Often used with a loss_weight.
// Params: reduction_param { operation (SUM (default) | ASUM | SUMSQ | MEAN), axis (default 0,
// negative counts from the end), coeff (default 1) }. Not in-place.
class ReductionLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Reduction"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

  ReductionParameter::ReductionOp op_ = ReductionParameter::SUM;
  double coeff_ = 1.0;  // includes 1 / dim for MEAN
  int64_t num_ = 0;
  int64_t dim_ = 0;
  Blob abs_;  // GPU, ASUM: |x|, summed per row

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
