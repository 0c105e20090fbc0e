#include "layers/reduction/reduction_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void ReductionLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "Reduction does not allow in-place computation");
  const ReductionParameter& param = layer_param_.reduction_param();
  const int num_axes = bottom[0]->num_axes();
  // Axis 0 of a scalar bottom is allowed (it reduces the one element).
  const int hi = num_axes == 0 ? 1 : num_axes;
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < hi, "reduction_param.axis",
                    "must be in [", -num_axes, ", ", hi, ") for a bottom of shape ",
                    bottom[0]->shape_string(), ", got ", param.axis());
  const int axis = bottom[0]->CanonicalAxisIndex(param.axis());
  op_ = param.operation();
  top[0]->Reshape(std::vector<int>(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis));
  num_ = bottom[0]->count(0, axis);
  dim_ = bottom[0]->count(axis);
  coeff_ = param.coeff();
  if (op_ == ReductionParameter::MEAN) coeff_ /= static_cast<double>(dim_);
  abs_.set_dtype(bottom[0]->dtype());
  if (op_ == ReductionParameter::ASUM)
    abs_.ReshapeLike(*bottom[0]);
  else
    abs_.Reshape(std::vector<int>{0});
}

template <typename T>
void ReductionLayer::Forward(const Blob& bottom, Blob* top) const {
  const T* x = bottom.cpu_data<T>();
  T* top_data = top->mutable_cpu_data<T>();
  for (int64_t n = 0; n < num_; ++n, x += dim_) {
    T value = 0;
    switch (op_) {
      case ReductionParameter::SUM:
      case ReductionParameter::MEAN:
        for (int64_t j = 0; j < dim_; ++j) value += x[j];
        break;
      case ReductionParameter::ASUM:
        value = cpu::Asum<T>(dim_, x);
        break;
      case ReductionParameter::SUMSQ:
        value = cpu::Dot<T>(dim_, x, x);
        break;
    }
    top_data[n] = value;
  }
  if (coeff_ != 1.0) cpu::Scal<T>(num_, static_cast<T>(coeff_), top_data);
}

template <typename T>
void ReductionLayer::Backward(const Blob& top, Blob* bottom) const {
  const T* top_diff = top.cpu_diff<T>();
  const T* x = bottom->cpu_data<T>();
  T* dx = bottom->mutable_cpu_diff<T>();
  for (int64_t n = 0; n < num_; ++n, x += dim_, dx += dim_) {
    const T scale = top_diff[n] * static_cast<T>(coeff_);
    switch (op_) {
      case ReductionParameter::SUM:
      case ReductionParameter::MEAN:
        cpu::Set<T>(dim_, scale, dx);
        break;
      case ReductionParameter::ASUM:
        for (int64_t j = 0; j < dim_; ++j)
          dx[j] = scale * static_cast<T>((T(0) < x[j]) - (x[j] < T(0)));
        break;
      case ReductionParameter::SUMSQ:
        cpu::Scale<T>(dim_, 2 * scale, x, dx);
        break;
    }
  }
}

void ReductionLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(*bottom[0], top[0]));
}

void ReductionLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(*top[0], bottom[0]));
}

CREMA_REGISTER_LAYER(Reduction, ReductionLayer);

}  // namespace crema
