#include "layers/sigmoid_cross_entropy_loss/sigmoid_cross_entropy_loss_layer.hpp"

#include <algorithm>
#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void SigmoidCrossEntropyLossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::LayerSetUp(bottom, top);
  const LossParameter& loss_param = layer_param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  if (has_ignore_label_) ignore_label_ = loss_param.ignore_label();
  // Unlike SoftmaxWithLoss, Caffe's default here is BATCH_SIZE (not the proto's VALID).
  if (loss_param.has_normalization())
    normalization_ = loss_param.normalization();
  else if (loss_param.has_normalize())
    normalization_ = loss_param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  else
    normalization_ = LossParameter::BATCH_SIZE;
}

void SigmoidCrossEntropyLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  CREMA_CHECK_SHAPE(bottom[0]->count() == bottom[1]->count(),
                    "the targets must have as many values as the predictions, got ",
                    bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(
      bottom[1]->dtype() == bottom[0]->dtype(), "the targets (", DataTypeName(bottom[1]->dtype()),
      ") must have the element type of the predictions (", DataTypeName(bottom[0]->dtype()), ")");
  outer_num_ = bottom[0]->shape(0);
  inner_num_ = bottom[0]->count(1);
  losses_.ReshapeLike(*bottom[0]);
  counts_.ReshapeLike(*bottom[0]);
  sums_.Reshape(std::vector<int>{2});
}

double SigmoidCrossEntropyLossLayer::Normalizer(int64_t valid_count) const {
  return LossLayer::Normalizer(normalization_, outer_num_, inner_num_, valid_count);
}

template <typename T>
void SigmoidCrossEntropyLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const T* input = bottom[0]->cpu_data<T>();
  const T* target = bottom[1]->cpu_data<T>();
  const int64_t count = bottom[0]->count();
  double loss = 0;
  int64_t valid = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (has_ignore_label_ && LabelIndex(target[i]) == ignore_label_) continue;
    const double x = input[i];
    const double positive = x >= 0 ? 1.0 : 0.0;
    loss -= x * (target[i] - positive) - std::log1p(std::exp(x - 2 * x * positive));
    ++valid;
  }
  normalizer_ = Normalizer(valid);
  top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(loss / normalizer_);
}

template <typename T>
void SigmoidCrossEntropyLossLayer::Backward(const BlobVec& top, const BlobVec& bottom) {
  const T* input = bottom[0]->cpu_data<T>();
  const T* target = bottom[1]->cpu_data<T>();
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  const T scale = static_cast<T>(top[0]->cpu_diff<T>()[0] / normalizer_);
  const int64_t count = bottom[0]->count();
  for (int64_t i = 0; i < count; ++i) {
    if (has_ignore_label_ && LabelIndex(target[i]) == ignore_label_) {
      bottom_diff[i] = 0;
      continue;
    }
    const T sigmoid = T(0.5) * std::tanh(T(0.5) * input[i]) + T(0.5);
    bottom_diff[i] = scale * (sigmoid - target[i]);
  }
}

void SigmoidCrossEntropyLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void SigmoidCrossEntropyLossLayer::BackwardCpu(const BlobVec& top,
                                               const std::vector<bool>& propagate_down,
                                               const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom));
}

bool SigmoidCrossEntropyLossLayer::WantsGradient(const std::vector<bool>& propagate_down) const {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the targets (bottom[1])");
  return propagate_down[0];
}

CREMA_REGISTER_LAYER(SigmoidCrossEntropyLoss, SigmoidCrossEntropyLossLayer);

}  // namespace crema
