#include "layers/infogain_loss/infogain_loss_layer.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {
namespace {

constexpr double kLogThreshold = 1e-20;  // Caffe's kLOG_THRESHOLD

}  // namespace

void InfogainLossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::LayerSetUp(bottom, top);
  const InfogainLossParameter& param = layer_param_.infogain_loss_param();
  const LossParameter& loss_param = layer_param_.loss_param();
  CREMA_CHECK_PARAM(!loss_param.has_normalize(), "loss_param.normalize",
                    "is deprecated and not accepted by InfogainLoss; use "
                    "loss_param.normalization");
  has_ignore_label_ = loss_param.has_ignore_label();
  if (has_ignore_label_) ignore_label_ = loss_param.ignore_label();
  normalization_ = loss_param.normalization();

  const int num_axes = bottom[0]->num_axes();
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes,
                    "infogain_loss_param.axis", "must be in [", -num_axes, ", ", num_axes,
                    ") for scores of shape ", bottom[0]->shape_string(), ", got ", param.axis());
  LayerParameter softmax_param(layer_param_);
  softmax_param.set_type("Softmax");
  softmax_param.clear_loss_weight();
  softmax_param.clear_blobs();
  softmax_param.clear_bottom();
  softmax_param.clear_top();
  softmax_param.mutable_softmax_param()->set_axis(param.axis());
  softmax_layer_ = LayerRegistry::Create(softmax_param);
  softmax_layer_->set_dtype(bottom[0]->dtype());
  softmax_layer_->set_device(device_);
  prob_.set_dtype(bottom[0]->dtype());
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  softmax_layer_->SetUp(softmax_bottom_, softmax_top_);

  if (bottom.size() < 3) {
    CREMA_CHECK_PARAM(param.has_source(), "infogain_loss_param.source",
                      "must name a binaryproto holding H when there is no third bottom");
    std::ifstream in(param.source(), std::ios::binary);
    if (!in)
      throw RuntimeError(ErrorPrefix("infogain_loss_param.source") +
                         StrCat("cannot open infogain_loss_param.source \"", param.source(), "\""));
    BlobProto proto;
    if (!proto.ParseFromIstream(&in))
      throw RuntimeError(
          ErrorPrefix("infogain_loss_param.source") +
          StrCat("infogain_loss_param.source \"", param.source(), "\" is not a binary BlobProto"));
    Blob loaded;
    loaded.FromProto(proto);
    infogain_.set_dtype(bottom[0]->dtype());
    infogain_.Reshape(loaded.shape());
    infogain_.CopyFrom(loaded);
  }
}

void InfogainLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  for (size_t i = 1; i < bottom.size(); ++i)
    CREMA_CHECK_SHAPE(bottom[i]->dtype() == bottom[0]->dtype(), "bottom[", i, "] (",
                      DataTypeName(bottom[i]->dtype()),
                      ") must have the element type of the scores (",
                      DataTypeName(bottom[0]->dtype()), ")");
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Reshape(softmax_bottom_, softmax_top_);
  axis_ = bottom[0]->CanonicalAxisIndex(layer_param_.infogain_loss_param().axis());
  outer_num_ = bottom[0]->count(0, axis_);
  inner_num_ = bottom[0]->count(axis_ + 1);
  num_labels_ = bottom[0]->shape(axis_);
  CREMA_CHECK_SHAPE(outer_num_ * inner_num_ == bottom[1]->count(),
                    "the number of labels must match the number of predictions: with "
                    "infogain_loss_param.axis ",
                    axis_, " and scores of shape ", bottom[0]->shape_string(), " there must be ",
                    outer_num_ * inner_num_, " labels, got ", bottom[1]->shape_string());
  const Blob& infogain = Infogain(bottom);
  CREMA_CHECK_SHAPE(infogain.count() == static_cast<int64_t>(num_labels_) * num_labels_,
                    "H must be ", num_labels_, " x ", num_labels_, " for ", num_labels_,
                    " classes, got ", infogain.shape_string(),
                    bottom.size() >= 3 ? " (bottom[2])" : " (infogain_loss_param.source)");
  if (top.size() >= 2) top[1]->ReshapeLike(*bottom[0]);
  losses_.Reshape(std::vector<int>{static_cast<int>(outer_num_ * inner_num_)});
  counts_.Reshape(std::vector<int>{static_cast<int>(outer_num_ * inner_num_)});
  sums_.Reshape(std::vector<int>{3});
  row_sums_.set_dtype(bottom[0]->dtype());
  row_sums_.Reshape(std::vector<int>{num_labels_});
}

double InfogainLossLayer::Normalizer(int64_t valid_count) const {
  return LossLayer::Normalizer(normalization_, outer_num_, inner_num_, valid_count);
}

int InfogainLossLayer::Label(double value, int64_t index) const {
  const int label = LabelIndex(value);
  if (label < 0 || label >= num_labels_)
    throw RuntimeError(
        ErrorPrefix() +
        StrCat("label ", value, " at position ", index, " is outside [0, ", num_labels_, ")",
               has_ignore_label_ ? StrCat(" and is not the ignore_label ", ignore_label_)
                                 : std::string()));
  return label;
}

template <typename T>
void InfogainLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const T* prob = prob_.cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  const T* infogain = Infogain(bottom).cpu_data<T>();
  const int64_t dim = num_labels_ * inner_num_;
  double loss = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < outer_num_; ++i) {
    for (int64_t j = 0; j < inner_num_; ++j) {
      const int64_t index = i * inner_num_ + j;
      if (has_ignore_label_ && LabelIndex(label[index]) == ignore_label_) continue;
      const int l = Label(label[index], index);
      for (int k = 0; k < num_labels_; ++k) {
        const double p =
            std::max(static_cast<double>(prob[i * dim + k * inner_num_ + j]), kLogThreshold);
        loss -= infogain[l * num_labels_ + k] * std::log(p);
      }
      ++count;
    }
  }
  top[0]->mutable_cpu_data<T>()[0] = static_cast<T>(loss / Normalizer(count));
  if (top.size() == 2) top[1]->ShareData(prob_);
}

template <typename T>
void InfogainLossLayer::Backward(const BlobVec& top, const BlobVec& bottom) {
  const T* prob = prob_.cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  const T* infogain = Infogain(bottom).cpu_data<T>();
  std::vector<T> row_sums(num_labels_, T(0));
  for (int l = 0; l < num_labels_; ++l)
    for (int k = 0; k < num_labels_; ++k) row_sums[l] += infogain[l * num_labels_ + k];
  T* bottom_diff = bottom[0]->mutable_cpu_diff<T>();
  const int64_t dim = num_labels_ * inner_num_;
  int64_t count = 0;
  for (int64_t i = 0; i < outer_num_; ++i) {
    for (int64_t j = 0; j < inner_num_; ++j) {
      const int64_t index = i * inner_num_ + j;
      if (has_ignore_label_ && LabelIndex(label[index]) == ignore_label_) {
        for (int k = 0; k < num_labels_; ++k) bottom_diff[i * dim + k * inner_num_ + j] = 0;
        continue;
      }
      const int l = Label(label[index], index);
      for (int k = 0; k < num_labels_; ++k) {
        const int64_t at = i * dim + k * inner_num_ + j;
        bottom_diff[at] = prob[at] * row_sums[l] - infogain[l * num_labels_ + k];
      }
      ++count;
    }
  }
  const T loss_weight = static_cast<T>(top[0]->cpu_diff<T>()[0] / Normalizer(count));
  cpu::Scal<T>(bottom[0]->count(), loss_weight, bottom_diff);
}

void InfogainLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  softmax_bottom_ = {bottom[0]};
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void InfogainLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (!WantsGradient(propagate_down)) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, bottom));
}

bool InfogainLossLayer::WantsGradient(const std::vector<bool>& propagate_down) const {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the label input (bottom[1])");
  if (propagate_down.size() > 2 && propagate_down[2])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the infogain matrix (bottom[2])");
  return propagate_down[0];
}

CREMA_REGISTER_LAYER(InfogainLoss, InfogainLossLayer);

}  // namespace crema
