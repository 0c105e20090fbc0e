#include "layers/hinge_loss/hinge_loss_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void HingeLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  const HingeLossParameter::Norm norm = layer_param_.hinge_loss_param().norm();
  CREMA_CHECK_PARAM(norm == HingeLossParameter::L1 || norm == HingeLossParameter::L2,
                    "hinge_loss_param.norm", "must be L1 or L2, got ", static_cast<int>(norm));
  CREMA_CHECK_SHAPE(bottom[1]->count() == bottom[0]->shape(0),
                    "needs one label per item: ", bottom[0]->shape(0), " items in ",
                    bottom[0]->shape_string(), ", got labels ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(
      bottom[1]->dtype() == bottom[0]->dtype(), "the labels (", DataTypeName(bottom[1]->dtype()),
      ") must have the element type of the scores (", DataTypeName(bottom[0]->dtype()), ")");
  margins_.set_dtype(bottom[0]->dtype());
  margins_.ReshapeLike(*bottom[0]);
  scalars_.set_dtype(bottom[0]->dtype());
  scalars_.Reshape(std::vector<int>{2});
}

int HingeLossLayer::Label(double value, int64_t index, int64_t dim) const {
  const int label = LabelIndex(value);
  if (label < 0 || label >= dim)
    throw RuntimeError(ErrorPrefix() + StrCat("label ", value, " at position ", index,
                                              " is outside [0, ", dim, ")"));
  return label;
}

template <typename T>
void HingeLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t count = bottom[0]->count();
  const int64_t dim = count / num;
  const T* bottom_data = bottom[0]->cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  T* margin = margins_.mutable_cpu_data<T>();
  cpu::Copy<T>(count, bottom_data, margin);
  for (int64_t i = 0; i < num; ++i) margin[i * dim + Label(label[i], i, dim)] *= -1;
  for (int64_t i = 0; i < count; ++i) margin[i] = std::max(T(0), T(1) + margin[i]);
  const T sum = layer_param_.hinge_loss_param().norm() == HingeLossParameter::L2
                    ? cpu::Dot<T>(count, margin, margin)
                    : cpu::Asum<T>(count, margin);
  top[0]->mutable_cpu_data<T>()[0] = sum / static_cast<T>(num);
}

template <typename T>
void HingeLossLayer::Backward(const BlobVec& top, const BlobVec& bottom) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t count = bottom[0]->count();
  const int64_t dim = count / num;
  const T* label = bottom[1]->cpu_data<T>();
  const T* margin = margins_.cpu_data<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  const T loss_weight = top[0]->cpu_diff<T>()[0];
  if (layer_param_.hinge_loss_param().norm() == HingeLossParameter::L2) {
    cpu::Scale<T>(count, loss_weight * 2 / static_cast<T>(num), margin, bottom_diff);
  } else {
    // d|m|/dm is 1 where the margin is active, 0 at and below 0 (Caffe's sign(0) = 0).
    const T scale = loss_weight / static_cast<T>(num);
    for (int64_t i = 0; i < count; ++i) bottom_diff[i] = margin[i] > 0 ? scale : T(0);
  }
  for (int64_t i = 0; i < num; ++i) bottom_diff[i * dim + Label(label[i], i, dim)] *= -1;
}

void HingeLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void HingeLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom));
}

bool HingeLossLayer::WantsGradient(const std::vector<bool>& propagate_down) const {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the label input (bottom[1])");
  return propagate_down[0];
}

CREMA_REGISTER_LAYER(HingeLoss, HingeLossLayer);

}  // namespace crema
