#include "layers/softmax_with_loss/softmax_with_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void SoftmaxWithLossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::LayerSetUp(bottom, top);
  // The inner softmax gets this layer's softmax_param (and engine choice) but no loss.
  LayerParameter softmax_param(layer_param_);
  softmax_param.set_type("Softmax");
  softmax_param.clear_loss_weight();
  softmax_param.clear_blobs();
  softmax_param.clear_bottom();
  softmax_param.clear_top();
  softmax_layer_ = LayerRegistry::Create(softmax_param);
  softmax_layer_->set_dtype(bottom[0]->dtype());
  softmax_layer_->set_device(device_);
  prob_.set_dtype(bottom[0]->dtype());
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  softmax_layer_->SetUp(softmax_bottom_, softmax_top_);

  const LossParameter& loss_param = layer_param_.loss_param();
  has_ignore_label_ = loss_param.has_ignore_label();
  if (has_ignore_label_) ignore_label_ = loss_param.ignore_label();
  if (!loss_param.has_normalization() && loss_param.has_normalize())
    normalization_ = loss_param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  else
    normalization_ = loss_param.normalization();
}

void SoftmaxWithLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  CREMA_CHECK_SHAPE(
      bottom[1]->dtype() == bottom[0]->dtype(), "the labels (", DataTypeName(bottom[1]->dtype()),
      ") must have the element type of the scores (", DataTypeName(bottom[0]->dtype()), ")");
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Reshape(softmax_bottom_, softmax_top_);
  axis_ = bottom[0]->CanonicalAxisIndex(layer_param_.softmax_param().axis());
  outer_num_ = bottom[0]->count(0, axis_);
  inner_num_ = bottom[0]->count(axis_ + 1);
  CREMA_CHECK_SHAPE(outer_num_ * inner_num_ == bottom[1]->count(),
                    "the number of labels must match the number of predictions: with softmax "
                    "axis ",
                    axis_, " and scores of shape ", bottom[0]->shape_string(), " there must be ",
                    outer_num_ * inner_num_, " labels, got ", bottom[1]->shape_string());
  if (top.size() >= 2) top[1]->ReshapeLike(*bottom[0]);
}

double SoftmaxWithLossLayer::Normalizer(int64_t valid_count) const {
  return LossLayer::Normalizer(normalization_, outer_num_, inner_num_, valid_count);
}

void SoftmaxWithLossLayer::CheckForward(const BlobVec& bottom, const BlobVec& top) {
  if (!device().is_cuda()) return;  // the CPU Forward checks as it goes
  // A bad label makes the GPU loss NaN, so a finite loss (read anyway, for the net's loss) means
  // none: one device read per Forward.
  double loss = 0;
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), T, loss = top[0]->cpu_data<T>()[0]);
  if (std::isfinite(loss)) return;
  // Written on the device by the last Forward, or by a graph replay of it, which the head does
  // not know of.
  device_scalars_.data()->DeviceWritten();
  const double bad_at = device_scalars_.cpu_data<double>()[0];
  if (bad_at == 0) return;
  const int64_t index = static_cast<int64_t>(bad_at) - 1;
  CREMA_DISPATCH_FLOAT(bottom[1]->dtype(), T, BadLabel(index, bottom[1]->cpu_data<T>()[index]));
}

void SoftmaxWithLossLayer::BadLabel(int64_t index, double label) const {
  throw RuntimeError(
      ErrorPrefix() +
      StrCat("label ", label, " at position ", index, " is outside [0, ", prob_.shape(axis_), ")",
             has_ignore_label_ ? StrCat(" and is not the ignore_label ", ignore_label_)
                               : std::string()));
}

template <typename T>
void SoftmaxWithLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const T* prob_data = prob_.cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  const int64_t channels = prob_.shape(axis_);
  const int64_t dim = prob_.count() / outer_num_;
  double loss = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < outer_num_; ++i) {
    for (int64_t j = 0; j < inner_num_; ++j) {
      const int64_t index = i * inner_num_ + j;
      const int label_value = LabelIndex(label[index]);
      if (has_ignore_label_ && label_value == ignore_label_) continue;
      if (label_value < 0 || label_value >= channels) BadLabel(index, label[index]);
      const T p = prob_data[i * dim + label_value * inner_num_ + j];
      loss -= std::log(std::max(p, static_cast<T>(FLT_MIN)));
      ++count;
    }
  }
  top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(loss / Normalizer(count));
  if (top.size() == 2) top[1]->ShareData(prob_);
}

template <typename T>
void SoftmaxWithLossLayer::Backward(const BlobVec& top, const BlobVec& bottom) {
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  cpu::Copy<T>(prob_.count(), prob_.cpu_data<T>(), bottom_diff);
  const T* label = bottom[1]->cpu_data<T>();
  const int64_t channels = bottom[0]->shape(axis_);
  const int64_t dim = prob_.count() / outer_num_;
  int64_t count = 0;
  for (int64_t i = 0; i < outer_num_; ++i) {
    for (int64_t j = 0; j < inner_num_; ++j) {
      const int64_t index = i * inner_num_ + j;
      const int label_value = LabelIndex(label[index]);
      if (has_ignore_label_ && label_value == ignore_label_) {
        for (int64_t c = 0; c < channels; ++c) bottom_diff[i * dim + c * inner_num_ + j] = 0;
        continue;
      }
      if (label_value < 0 || label_value >= channels) BadLabel(index, label[index]);
      bottom_diff[i * dim + label_value * inner_num_ + j] -= 1;
      ++count;
    }
  }
  const T loss_weight = static_cast<T>(top[0]->cpu_diff<T>()[0] / Normalizer(count));
  cpu::Scal<T>(prob_.count(), loss_weight, bottom_diff);
}

void SoftmaxWithLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void SoftmaxWithLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the label input (bottom[1])");
  if (!propagate_down[0]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom));
}

CREMA_REGISTER_LAYER(SoftmaxWithLoss, SoftmaxWithLossLayer);

}  // namespace crema
