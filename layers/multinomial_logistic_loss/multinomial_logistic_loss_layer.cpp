#include "layers/multinomial_logistic_loss/multinomial_logistic_loss_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {
namespace {

constexpr double kLogThreshold = 1e-20;  // Caffe's kLOG_THRESHOLD

}  // namespace

void MultinomialLogisticLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  CREMA_CHECK_SHAPE(bottom[1]->num_axes() <= 4 && bottom[1]->count() == bottom[0]->shape(0),
                    "needs one label per item (N, or N x 1 x 1 x 1 with N = ", bottom[0]->shape(0),
                    "), got ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(
      bottom[1]->dtype() == bottom[0]->dtype(), "the labels (", DataTypeName(bottom[1]->dtype()),
      ") must have the element type of the probabilities (", DataTypeName(bottom[0]->dtype()), ")");
  losses_.Reshape(std::vector<int>{bottom[0]->shape(0)});
  scalars_.Reshape(std::vector<int>{2});
}

int MultinomialLogisticLossLayer::Label(double value, int64_t index, int64_t dim) const {
  const int label = LabelIndex(value);
  if (label < 0 || label >= dim)
    throw RuntimeError(ErrorPrefix() + StrCat("label ", value, " at position ", index,
                                              " is outside [0, ", dim, ")"));
  return label;
}

template <typename T>
void MultinomialLogisticLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t dim = bottom[0]->count() / num;
  const T* prob = bottom[0]->cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  double loss = 0;
  for (int64_t i = 0; i < num; ++i) {
    const T p = prob[i * dim + Label(label[i], i, dim)];
    loss -= std::log(std::max(static_cast<double>(p), kLogThreshold));
  }
  top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(loss / static_cast<double>(num));
}

template <typename T>
void MultinomialLogisticLossLayer::Backward(const BlobVec& top, const BlobVec& bottom) {
  const int64_t num = bottom[0]->shape(0);
  const int64_t dim = bottom[0]->count() / num;
  const T* prob = bottom[0]->cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  cpu::Set<T>(bottom[0]->count(), T(0), bottom_diff);
  const T scale = -top[0]->cpu_diff<T>()[0] / static_cast<T>(num);
  for (int64_t i = 0; i < num; ++i) {
    const int64_t at = i * dim + Label(label[i], i, dim);
    bottom_diff[at] = scale / std::max(prob[at], static_cast<T>(kLogThreshold));
  }
}

void MultinomialLogisticLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void MultinomialLogisticLossLayer::BackwardCpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom));
}

bool MultinomialLogisticLossLayer::WantsGradient(const std::vector<bool>& propagate_down) const {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the label input (bottom[1])");
  return propagate_down[0];
}

CREMA_REGISTER_LAYER(MultinomialLogisticLoss, MultinomialLogisticLossLayer);

}  // namespace crema
