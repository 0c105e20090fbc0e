#include "layers/eltwise/eltwise_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"
#include "math/activation.hpp"
#include "math/math.hpp"

namespace crema {

void EltwiseLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const EltwiseParameter& param = layer_param_.eltwise_param();
  op_ = param.operation();
  CREMA_CHECK_PARAM(
      param.coeff_size() == 0 || param.coeff_size() == static_cast<int>(bottom.size()),
      "eltwise_param.coeff", "must be given once per bottom (", bottom.size(),
      ") or not at all, got ", param.coeff_size(), " values");
  CREMA_CHECK_PARAM(!(op_ == EltwiseParameter::PROD && param.coeff_size() > 0),
                    "eltwise_param.coeff", "is only used by operation SUM, not PROD");
  coeffs_.assign(bottom.size(), 1.0);
  for (int i = 0; i < param.coeff_size(); ++i) coeffs_[i] = param.coeff(i);
  stable_prod_grad_ = param.stable_prod_grad();
}

void EltwiseLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    CREMA_CHECK_SHAPE(bottom[i] != top[0], "Eltwise does not allow in-place computation");
    CREMA_CHECK_SHAPE(bottom[i]->shape() == bottom[0]->shape(), "all bottoms must have the same ",
                      "shape: bottom 0 is ", bottom[0]->shape_string(), ", bottom ", i, " is ",
                      bottom[i]->shape_string());
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (op_ == EltwiseParameter::MAX) max_idx_.resize(bottom[0]->count());
}

bool EltwiseLayer::AllowsInPlaceOnFirstBottom() const {
  return op_ == EltwiseParameter::SUM &&
         std::all_of(coeffs_.begin(), coeffs_.end(), [](double c) { return c == 1.0; });
}

template <typename T>
void EltwiseLayer::Forward(const BlobVec& bottom, Blob* top) {
  const int64_t count = top->count();
  T* top_data = top->mutable_cpu_data<T>();
  switch (op_) {
    case EltwiseParameter::PROD:
      cpu::Mul<T>(count, bottom[0]->cpu_data<T>(), bottom[1]->cpu_data<T>(), top_data);
      for (size_t i = 2; i < bottom.size(); ++i)
        cpu::Mul<T>(count, top_data, bottom[i]->cpu_data<T>(), top_data);
      break;
    case EltwiseParameter::SUM:
      if (std::all_of(coeffs_.begin(), coeffs_.end(), [](double c) { return c == 1.0; })) {
        SumOfOnes<T>(bottom, top_data, count);
        return;  // the fused ReLU is applied on the way
      }
      cpu::Set<T>(count, T(0), top_data);
      for (size_t i = 0; i < bottom.size(); ++i)
        cpu::Axpy<T>(count, static_cast<T>(coeffs_[i]), bottom[i]->cpu_data<T>(), top_data);
      break;
    case EltwiseParameter::MAX: {
      const T* a = bottom[0]->cpu_data<T>();
      const T* b = bottom[1]->cpu_data<T>();
      for (int64_t j = 0; j < count; ++j) {
        // Strictly greater: a tie between the first two bottoms goes to bottom 1 (as Caffe).
        const bool first = a[j] > b[j];
        top_data[j] = first ? a[j] : b[j];
        max_idx_[j] = first ? 0 : 1;
      }
      for (size_t i = 2; i < bottom.size(); ++i) {
        const T* x = bottom[i]->cpu_data<T>();
        for (int64_t j = 0; j < count; ++j) {
          if (x[j] > top_data[j]) {
            top_data[j] = x[j];
            max_idx_[j] = static_cast<int>(i);
          }
        }
      }
      break;
    }
  }
  if (fused_relu()) ReLUInPlace(count, static_cast<T>(fused_relu_slope()), top_data);
}

template <typename T>
void EltwiseLayer::SumOfOnes(const BlobVec& bottom, T* top_data, int64_t count) const {
  // 0 + x0 + x1 + ..., the sums Set(0) and Axpy with coefficient 1 compute (1 * x is exact), in
  // one pass for two bottoms (ResNet's shortcut) and one pass per bottom otherwise.
  const T slope = static_cast<T>(fused_relu_slope());
  const bool relu = fused_relu();
  if (bottom.size() == 2) {
    const T* a = bottom[0]->cpu_data<T>();
    const T* b = bottom[1]->cpu_data<T>();
#pragma omp parallel for if (count > 262144)
    for (int64_t j = 0; j < count; ++j) {
      const T sum = (T(0) + a[j]) + b[j];
      top_data[j] = relu ? ReLUValue(sum, slope) : sum;
    }
    return;
  }
  for (size_t i = 0; i < bottom.size(); ++i) {
    const T* x = bottom[i]->cpu_data<T>();
    const bool last = i + 1 == bottom.size();
#pragma omp parallel for if (count > 262144)
    for (int64_t j = 0; j < count; ++j) {
      const T sum = (i == 0 ? T(0) : top_data[j]) + x[j];
      top_data[j] = relu && last ? ReLUValue(sum, slope) : sum;
    }
  }
}

template <typename T>
void EltwiseLayer::Backward(const Blob& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  const int64_t count = top.count();
  const T* top_data = top.cpu_data<T>();
  const T* top_diff = top.cpu_diff<T>();
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    const T* bottom_data = bottom[i]->cpu_data<T>();
    T* bottom_diff = bottom[i]->mutable_cpu_diff<T>();
    switch (op_) {
      case EltwiseParameter::PROD:
        if (stable_prod_grad_) {
          bool initialized = false;
          for (size_t j = 0; j < bottom.size(); ++j) {
            if (j == i) continue;
            if (!initialized) {
              cpu::Copy<T>(count, bottom[j]->cpu_data<T>(), bottom_diff);
              initialized = true;
            } else {
              cpu::Mul<T>(count, bottom[j]->cpu_data<T>(), bottom_diff, bottom_diff);
            }
          }
        } else {
          cpu::Div<T>(count, top_data, bottom_data, bottom_diff);
        }
        cpu::Mul<T>(count, bottom_diff, top_diff, bottom_diff);
        break;
      case EltwiseParameter::SUM:
        if (coeffs_[i] == 1.0)
          cpu::Copy<T>(count, top_diff, bottom_diff);
        else
          cpu::Scale<T>(count, static_cast<T>(coeffs_[i]), top_diff, bottom_diff);
        break;
      case EltwiseParameter::MAX:
        for (int64_t j = 0; j < count; ++j)
          bottom_diff[j] = max_idx_[j] == static_cast<int>(i) ? top_diff[j] : T(0);
        break;
    }
  }
}

void EltwiseLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, Forward<T>(bottom, top[0]));
}

void EltwiseLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                               const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, Backward<T>(*top[0], propagate_down, bottom));
}

CREMA_REGISTER_LAYER(Eltwise, EltwiseLayer);

}  // namespace crema
