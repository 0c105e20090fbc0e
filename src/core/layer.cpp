#include "crema/layer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cuda_context.hpp"
#include "core/filler.hpp"
#include "core/workspace.hpp"

namespace crema {

Layer::Layer(const LayerParameter& param) : layer_param_(param), phase_(param.phase()) {
  // Blobs given in the parameter (e.g. from a .caffemodel) become the layer's learnable blobs.
  for (const BlobProto& blob_proto : layer_param_.blobs()) {
    auto blob = std::make_shared<Blob>(dtype_);
    blob->FromProto(blob_proto);
    blobs_.push_back(blob);
  }
}

std::string Layer::ErrorPrefix(const std::string& field) const {
  std::string where = locator_ ? locator_(field) : "";
  if (!where.empty()) where += ": ";
  return where + "layer \"" + layer_param_.name() + "\" (" + layer_param_.type() + "): ";
}

void Layer::set_loss(int top_index, double value) {
  if (static_cast<int>(loss_.size()) <= top_index) loss_.resize(top_index + 1, 0.0);
  loss_[top_index] = value;
}

void Layer::set_param_propagate_down(int param_id, bool value) {
  if (static_cast<int>(param_propagate_down_.size()) <= param_id)
    param_propagate_down_.resize(param_id + 1, true);
  param_propagate_down_[param_id] = value;
}

void Layer::CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const {
  auto fail = [&](const char* what, const char* rel, int n, size_t got) {
    throw ConfigError(ErrorPrefix() + StrCat("takes ", rel, n, " ", what, " blob",
                                             n == 1 ? "" : "s", ", got ", got));
  };
  if (ExactNumBottomBlobs() >= 0 && static_cast<int>(bottom.size()) != ExactNumBottomBlobs())
    fail("bottom", "", ExactNumBottomBlobs(), bottom.size());
  if (MinBottomBlobs() >= 0 && static_cast<int>(bottom.size()) < MinBottomBlobs())
    fail("bottom", "at least ", MinBottomBlobs(), bottom.size());
  if (MaxBottomBlobs() >= 0 && static_cast<int>(bottom.size()) > MaxBottomBlobs())
    fail("bottom", "at most ", MaxBottomBlobs(), bottom.size());
  if (ExactNumTopBlobs() >= 0 && static_cast<int>(top.size()) != ExactNumTopBlobs())
    fail("top", "", ExactNumTopBlobs(), top.size());
  if (MinTopBlobs() >= 0 && static_cast<int>(top.size()) < MinTopBlobs())
    fail("top", "at least ", MinTopBlobs(), top.size());
  if (MaxTopBlobs() >= 0 && static_cast<int>(top.size()) > MaxTopBlobs())
    fail("top", "at most ", MaxTopBlobs(), top.size());
  if (EqualNumBottomTopBlobs() && bottom.size() != top.size())
    throw ConfigError(ErrorPrefix() + StrCat("needs as many tops as bottoms, got ", bottom.size(),
                                             " bottoms and ", top.size(), " tops"));
}

void Layer::SetUp(const BlobVec& bottom, const BlobVec& top) {
  CheckBlobCounts(bottom, top);
  for (Blob* t : top) {
    bool is_bottom = false;
    for (Blob* b : bottom) is_bottom |= (b == t);
    if (!is_bottom && t->dtype() != dtype_) t->set_dtype(dtype_);
  }
  LayerSetUp(bottom, top);
  Reshape(bottom, top);
  SetLossWeights(top);
}

void Layer::SetLossWeights(const BlobVec& top) {
  const int num_loss_weights = layer_param_.loss_weight_size();
  if (num_loss_weights == 0) return;
  if (num_loss_weights != static_cast<int>(top.size()))
    throw ConfigError(ErrorPrefix("loss_weight") +
                      StrCat("loss_weight must be given once per top (", top.size(),
                             ") or not at all, got ", num_loss_weights));
  for (int i = 0; i < static_cast<int>(top.size()); ++i) {
    const double weight = layer_param_.loss_weight(i);
    if (weight != 0 && !HasGradient())
      throw ConfigError(
          ErrorPrefix(StrCat("loss_weight[", i, "]")) +
          StrCat("loss_weight must be 0: ", type(),
                 " has no gradient, so its top cannot be a loss (got loss_weight: ", weight, ")"));
    set_loss(i, weight);
    if (weight == 0) continue;
    CREMA_DISPATCH_FLOAT(top[i]->dtype(), T, {
      T* diff = top[i]->mutable_cpu_diff<T>();
      std::fill(diff, diff + top[i]->count(), static_cast<T>(weight));
    });
  }
}

double Layer::Forward(const BlobVec& bottom, const BlobVec& top) {
  Reshape(bottom, top);
  if (device_.is_cuda())
    ForwardGpu(bottom, top);
  else
    ForwardCpu(bottom, top);
  if (gpu::Capturing()) return 0;
  CheckForward(bottom, top);
  return WeightedLoss(top);
}

double Layer::WeightedLoss(const BlobVec& top) const {
  double loss = 0;
  for (int i = 0; i < static_cast<int>(top.size()); ++i) {
    if (this->loss(i) == 0) continue;
    // The loss weight sits in the top diff (see SetLossWeights). Summed in one fixed order (loss
    // tops are scalars but for a few), as cpu::Dot does in deterministic mode.
    CREMA_DISPATCH_FLOAT(top[i]->dtype(), T, {
      const T* data = top[i]->cpu_data<T>();
      const T* weights = top[i]->cpu_diff<T>();
      T sum = 0;
      for (int64_t k = 0; k < top[i]->count(); ++k) sum += data[k] * weights[k];
      loss += sum;
    });
  }
  return loss;
}

void Layer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                     const BlobVec& bottom) {
  if (forward_only_)
    throw RuntimeError(ErrorPrefix() +
                       "Backward on a layer set up for forward only (a net planned for inference)");
  if (device_.is_cuda())
    BackwardGpu(top, propagate_down, bottom);
  else
    BackwardCpu(top, propagate_down, bottom);
}

namespace {

std::string ShapeText(const std::vector<int>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? " " : "") + std::to_string(shape[i]);
  return text + ")";
}

// The shape, or Caffe's legacy 4-D form of it (leading axes of size 1, e.g. an old bias of
// (1, 1, 1, N)).
bool FitsShape(const std::vector<int>& given, const std::vector<int>& expected) {
  if (given == expected) return true;
  if (given.size() != 4 || expected.size() > 4) return false;
  std::vector<int> legacy(4 - expected.size(), 1);
  legacy.insert(legacy.end(), expected.begin(), expected.end());
  return given == legacy;
}

}  // namespace

void Layer::AdoptLoadedBlobs(const std::vector<ExpectedBlob>& expected, const std::string& why) {
  const std::string explained = why.empty() ? "" : " (" + why + ")";
  if (blobs_.size() != expected.size()) {
    std::string names;
    for (size_t i = 0; i < expected.size(); ++i)
      names += (i == 0 ? "" : i + 1 == expected.size() ? " and " : ", ") + expected[i].name;
    throw ConfigError(ErrorPrefix("blobs") + StrCat("blobs must hold ", expected.size(), " blob",
                                                    expected.size() == 1 ? "" : "s", " (", names,
                                                    "), got ", blobs_.size(), explained));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedBlob& want = expected[i];
    int64_t count = 1;
    for (int d : want.shape) count *= d;
    const bool fits = want.any_shape_of_its_count ? blobs_[i]->count() == count
                                                  : FitsShape(blobs_[i]->shape(), want.shape);
    if (!fits)
      throw ConfigError(ErrorPrefix("blobs") +
                        StrCat("blobs: ", want.name, " shape mismatch: expected ",
                               want.any_shape_of_its_count ? StrCat(count, " values ") : "",
                               ShapeText(want.shape), ", got ", ShapeText(blobs_[i]->shape()),
                               explained));
    blobs_[i]->Reshape(want.shape);
  }
  ConvertLoadedBlobs();
}

void Layer::SetUpLearnableBlobs(const std::vector<ExpectedBlob>& expected, const std::string& why) {
  if (!blobs_.empty()) {
    AdoptLoadedBlobs(expected, why);
    return;
  }
  for (const ExpectedBlob& want : expected) {
    blobs_.push_back(std::make_shared<Blob>(want.shape, dtype_));
    if (want.filler == nullptr)
      blobs_.back()->SetDataZero();
    else
      FillBlob(*want.filler, blobs_.back().get(),
               ErrorPrefix(want.filler_field) + want.filler_field + ": ");
  }
}

std::vector<Layer::ExpectedBlob> Layer::WeightAndBias(
    const std::string& param_field, const std::vector<int>& weight_shape,
    const FillerParameter& weight_filler, bool bias_term, const std::vector<int>& bias_shape,
    const FillerParameter& bias_filler, bool any_shape_of_its_count) {
  std::vector<ExpectedBlob> blobs = {{"weight", weight_shape, any_shape_of_its_count,
                                      &weight_filler, param_field + ".weight_filler"}};
  if (bias_term)
    blobs.push_back(
        {"bias", bias_shape, any_shape_of_its_count, &bias_filler, param_field + ".bias_filler"});
  return blobs;
}

void Layer::ConvertLoadedBlobs() {
  for (BlobPtr& blob : blobs_) {
    if (blob->dtype() == dtype_) continue;
    auto converted = std::make_shared<Blob>(blob->shape(), dtype_);
    converted->CopyFrom(*blob);
    blob = std::move(converted);
  }
}

Workspace& Layer::workspace() {
  if (!workspace_) workspace_ = std::make_shared<Workspace>();
  return *workspace_;
}

bool Layer::TakeFusedReLUBackward(int bottom, float* negative_slope) {
  if (bottom >= static_cast<int>(fused_relu_backward_.size()) ||
      std::isnan(fused_relu_backward_[bottom]))
    return false;
  *negative_slope = fused_relu_backward_[bottom];
  fused_relu_backward_taken_[bottom] = 1;
  return true;
}

const Layer::SgdStep* Layer::TakeFusedSgdStep(int param) {
  if (param >= static_cast<int>(fused_sgd_steps_.size()) || !fused_sgd_steps_[param].history)
    return nullptr;
  fused_sgd_step_taken_[param] = 1;
  return &fused_sgd_steps_[param];
}

void Layer::ToProto(LayerParameter* param, bool write_diff) const {
  param->Clear();
  param->CopyFrom(layer_param_);
  param->clear_blobs();
  for (const BlobPtr& blob : blobs_) blob->ToProto(param->add_blobs(), write_diff);
}

void NeuronLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  top[0]->ReshapeLike(*bottom[0]);
}

void LossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  // Loss layers weigh their first top by 1 unless the prototxt says otherwise.
  if (layer_param_.loss_weight_size() == 0) layer_param_.add_loss_weight(1.0f);
}

double LossLayer::Normalizer(LossParameter::NormalizationMode mode, int64_t outer_num,
                             int64_t inner_num, int64_t valid_count) {
  double normalizer = 1;
  switch (mode) {
    case LossParameter::FULL:
      normalizer = static_cast<double>(outer_num * inner_num);
      break;
    case LossParameter::VALID:
      normalizer = static_cast<double>(valid_count);
      break;
    case LossParameter::BATCH_SIZE:
      normalizer = static_cast<double>(outer_num);
      break;
    case LossParameter::NONE:
      normalizer = 1;
      break;
  }
  // Never divide by less than 1 (e.g. when every label is ignored).
  return std::max(1.0, normalizer);
}

void LossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() > 0 && bottom[1]->num_axes() > 0 &&
                        bottom[0]->shape(0) == bottom[1]->shape(0),
                    "the two bottoms must have the same first dimension (batch), got ",
                    bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  top[0]->Reshape(std::vector<int>{});
}

}  // namespace crema
