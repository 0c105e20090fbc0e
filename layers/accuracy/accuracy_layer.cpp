#include "layers/accuracy/accuracy_layer.hpp"

#include <algorithm>

#include "crema/layer_registry.hpp"

namespace crema {

void AccuracyLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const AccuracyParameter& param = layer_param_.accuracy_param();
  CREMA_CHECK_PARAM(param.top_k() >= 1, "accuracy_param.top_k", "must be >= 1, got ",
                    param.top_k());
  top_k_ = static_cast<int>(param.top_k());
  has_ignore_label_ = param.has_ignore_label();
  if (has_ignore_label_) ignore_label_ = param.ignore_label();
}

void AccuracyLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const int axis = layer_param_.accuracy_param().axis();
  CREMA_CHECK_PARAM(axis >= -bottom[0]->num_axes() && axis < bottom[0]->num_axes(),
                    "accuracy_param.axis", "must be in [", -bottom[0]->num_axes(), ", ",
                    bottom[0]->num_axes(), ") for scores of shape ", bottom[0]->shape_string(),
                    ", got ", axis);
  CREMA_CHECK_SHAPE(bottom[1]->count() > 0 && top_k_ <= bottom[0]->count() / bottom[1]->count(),
                    "accuracy_param.top_k (", top_k_,
                    ") must be at most the number of classes; scores ", bottom[0]->shape_string(),
                    ", labels ", bottom[1]->shape_string());
  axis_ = bottom[0]->CanonicalAxisIndex(axis);
  outer_num_ = bottom[0]->count(0, axis_);
  inner_num_ = bottom[0]->count(axis_ + 1);
  CREMA_CHECK_SHAPE(outer_num_ * inner_num_ == bottom[1]->count(),
                    "the number of labels must match the number of predictions: with axis ", axis_,
                    " and scores of shape ", bottom[0]->shape_string(), " there must be ",
                    outer_num_ * inner_num_, " labels, got ", bottom[1]->shape_string());
  CREMA_CHECK_SHAPE(
      bottom[1]->dtype() == bottom[0]->dtype(), "the labels (", DataTypeName(bottom[1]->dtype()),
      ") must have the element type of the scores (", DataTypeName(bottom[0]->dtype()), ")");
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) top[1]->Reshape(std::vector<int>{bottom[0]->shape(axis_)});
  correct_.Reshape(std::vector<int>{static_cast<int>(outer_num_ * inner_num_)});
  counted_.Reshape(std::vector<int>{static_cast<int>(outer_num_ * inner_num_)});
  sums_.Reshape(std::vector<int>{3});
}

template <typename T>
void AccuracyLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const T* bottom_data = bottom[0]->cpu_data<T>();
  const T* label = bottom[1]->cpu_data<T>();
  const int num_labels = bottom[0]->shape(axis_);
  const int64_t dim = bottom[0]->count() / outer_num_;
  T* per_class = top.size() > 1 ? top[1]->mutable_cpu_data<T>() : nullptr;
  if (per_class != nullptr) {
    std::fill(per_class, per_class + num_labels, T(0));
    class_counts_.assign(num_labels, 0);
  }
  int64_t correct = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < outer_num_; ++i) {
    for (int64_t j = 0; j < inner_num_; ++j) {
      const int64_t index = i * inner_num_ + j;
      const int label_value = LabelIndex(label[index]);
      if (has_ignore_label_ && label_value == ignore_label_) continue;
      if (label_value < 0 || label_value >= num_labels)
        throw RuntimeError(ErrorPrefix() + StrCat("label ", label[index], " at position ", index,
                                                  " is outside [0, ", num_labels, ")"));
      if (per_class != nullptr) ++class_counts_[label_value];
      const T true_score = bottom_data[i * dim + label_value * inner_num_ + j];
      int num_better = -1;  // the true class counts itself
      for (int k = 0; k < num_labels && num_better < top_k_; ++k)
        num_better += bottom_data[i * dim + k * inner_num_ + j] >= true_score;
      if (num_better < top_k_) {
        ++correct;
        if (per_class != nullptr) per_class[label_value] += 1;
      }
      ++count;
    }
  }
  top[0]->mutable_cpu_data<T>()[0] =
      count == 0 ? T(0) : static_cast<T>(static_cast<double>(correct) / count);
  if (per_class != nullptr)
    for (int c = 0; c < num_labels; ++c)
      per_class[c] = class_counts_[c] == 0 ? T(0) : per_class[c] / class_counts_[c];
}

void AccuracyLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void AccuracyLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                const BlobVec& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i)
    CREMA_CHECK_SHAPE(!propagate_down[i], "Accuracy has no gradient (bottom ", i,
                      "); nothing that needs a gradient may depend on its top");
}

CREMA_REGISTER_LAYER(Accuracy, AccuracyLayer);

}  // namespace crema
