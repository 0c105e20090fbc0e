#include "layers/multibox_loss/multibox_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>

#include "core/host_device.hpp"
#include "crema/layer_registry.hpp"

namespace crema {
namespace {

using boxes::Box;

// A blob's values as floats: SSD reads priors and ground truth into float boxes.
std::vector<float> FloatValues(const Blob& blob) {
  std::vector<float> values(blob.count());
  CREMA_DISPATCH_FLOAT(blob.dtype(), T, {
    const T* data = blob.cpu_data<T>();
    for (int64_t i = 0; i < blob.count(); ++i) values[i] = static_cast<float>(data[i]);
  });
  return values;
}

}  // namespace

void MultiBoxLossLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::LayerSetUp(bottom, top);
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  CREMA_CHECK_PARAM(param.has_num_classes(), "multibox_loss_param.num_classes", "must be given");
  CREMA_CHECK_PARAM(param.num_classes() >= 1, "multibox_loss_param.num_classes",
                    "must be >= 1, got ", param.num_classes());
  num_classes_ = static_cast<int>(param.num_classes());
  share_location_ = param.share_location();
  loc_classes_ = share_location_ ? 1 : num_classes_;
  CREMA_CHECK_PARAM(param.background_label_id() < param.num_classes(),
                    "multibox_loss_param.background_label_id", "must be < num_classes (",
                    num_classes_, "), got ", param.background_label_id());
  background_label_id_ = static_cast<int>(param.background_label_id());
  CREMA_CHECK_PARAM(
      !param.map_object_to_agnostic() || num_classes_ == 2, "multibox_loss_param.num_classes",
      "must be 2 (background and object) with map_object_to_agnostic, got ", num_classes_);

  // do_neg_mining is SSD's older switch; mining_type replaced it.
  mining_type_ = param.mining_type();
  if (param.has_do_neg_mining()) {
    const auto legacy =
        param.do_neg_mining() ? MultiBoxLossParameter::MAX_NEGATIVE : MultiBoxLossParameter::NONE;
    CREMA_CHECK_PARAM(
        !param.has_mining_type() ||
            (param.mining_type() != MultiBoxLossParameter::NONE) == param.do_neg_mining(),
        "multibox_loss_param.do_neg_mining", "(deprecated) ",
        param.do_neg_mining() ? "true" : "false", " contradicts mining_type ",
        MultiBoxLossParameter::MiningType_Name(param.mining_type()));
    if (!param.has_mining_type()) mining_type_ = legacy;
  }
  if (mining_type_ != MultiBoxLossParameter::NONE)
    CREMA_CHECK_PARAM(share_location_, "multibox_loss_param.share_location",
                      "must be true with mining_type ",
                      MultiBoxLossParameter::MiningType_Name(mining_type_),
                      " (SSD mines negatives only with shared locations)");
  CREMA_CHECK_PARAM(param.neg_pos_ratio() >= 0, "multibox_loss_param.neg_pos_ratio",
                    "must be >= 0, got ", param.neg_pos_ratio());
  if (mining_type_ == MultiBoxLossParameter::HARD_EXAMPLE)
    CREMA_CHECK_PARAM(param.sample_size() > 0, "multibox_loss_param.sample_size",
                      "must be > 0 with mining_type HARD_EXAMPLE, got ", param.sample_size());
  if (param.has_nms_param()) {
    nms_threshold_ = param.nms_param().nms_threshold();
    CREMA_CHECK_PARAM(nms_threshold_ >= 0, "multibox_loss_param.nms_param.nms_threshold",
                      "must be >= 0, got ", nms_threshold_);
    nms_top_k_ = param.nms_param().has_top_k() ? param.nms_param().top_k() : -1;
  } else {
    nms_threshold_ = 0;
    nms_top_k_ = -1;
  }

  const LossParameter& loss_param = layer_param_.loss_param();
  if (!loss_param.has_normalization() && loss_param.has_normalize())
    normalization_ = loss_param.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  else
    normalization_ = loss_param.normalization();

  // SSD nets say `propagate_down: true true false false`; the priors and the ground truth have
  // no gradient.
  for (int b = 2; b < std::min(4, layer_param_.propagate_down_size()); ++b)
    CREMA_CHECK_PARAM(!layer_param_.propagate_down(b), StrCat("propagate_down[", b, "]"),
                      "must be false: MultiBoxLoss cannot backpropagate to its ",
                      b == 2 ? "prior" : "ground truth", " input (bottom[", b, "])");
  use_loc_loss_ = layer_param_.propagate_down_size() < 1 || layer_param_.propagate_down(0);
  use_conf_loss_ = layer_param_.propagate_down_size() < 2 || layer_param_.propagate_down(1);
}

void MultiBoxLossLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  LossLayer::Reshape(bottom, top);
  const Blob& loc = *bottom[0];
  const Blob& conf = *bottom[1];
  const Blob& prior = *bottom[2];
  const Blob& gt = *bottom[3];
  std::string problem;
  num_priors_ = boxes::NumPriors(loc, conf, prior, loc_classes_, num_classes_, &problem);
  CREMA_CHECK_SHAPE(problem.empty(), problem);
  CREMA_CHECK_SHAPE(gt.num_axes() >= 2 && gt.shape(gt.num_axes() - 1) == 8,
                    "the ground truth bottom must be (1, 1, num_boxes, 8) as AnnotatedData makes "
                    "it, got ",
                    gt.shape_string());
  num_ = loc.shape(0);
  num_gt_ = static_cast<int>(gt.count() / 8);
  CREMA_CHECK_SHAPE(loc.dtype() == conf.dtype(), "loc (", DataTypeName(loc.dtype()), ") and conf (",
                    DataTypeName(conf.dtype()), ") must have one element type");
}

std::vector<std::vector<MultiBoxLossLayer::GroundTruth>> MultiBoxLossLayer::ReadGroundTruth(
    const Blob& blob) const {
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  const std::vector<float> data = FloatValues(blob);
  std::vector<std::vector<GroundTruth>> all(num_);
  for (int r = 0; r < num_gt_; ++r) {
    const float* row = data.data() + static_cast<size_t>(r) * 8;
    const int item_id = LabelIndex(row[0]);
    if (item_id == -1) continue;
    const int label = LabelIndex(row[1]);
    const auto bad = [&](const std::string& what) {
      return RuntimeError(ErrorPrefix() + StrCat("ground truth row ", r, " [", row[0], ", ", row[1],
                                                 ", ...]: ", what));
    };
    if (item_id < 0 || item_id >= num_)
      throw bad(StrCat("item_id ", row[0], " is outside [0, ", num_, ") (the batch size)"));
    if (label == background_label_id_)
      throw bad(StrCat("the label is the background label ", background_label_id_));
    if (label < 0 || (!param.map_object_to_agnostic() && label >= num_classes_))
      throw bad(StrCat("label ", row[1], " is outside [0, ", num_classes_, ") (num_classes)"));
    if (!param.use_difficult_gt() && row[7] != 0) continue;
    GroundTruth g;
    g.box = Box{row[3], row[4], row[5], row[6]};
    g.label = param.map_object_to_agnostic() ? background_label_id_ + 1 : label;
    all[item_id].push_back(g);
  }
  return all;
}

template <typename T>
std::vector<Box> MultiBoxLossLayer::DecodeClass(const T* loc, int loc_class) const {
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  std::vector<Box> decoded(num_priors_);
  for (int j = 0; j < num_priors_; ++j) {
    const T* pred = loc + (static_cast<int64_t>(j) * loc_classes_ + loc_class) * 4;
    const float t[4] = {static_cast<float>(pred[0]), static_cast<float>(pred[1]),
                        static_cast<float>(pred[2]), static_cast<float>(pred[3])};
    decoded[j] = boxes::Decode(priors_[j], &variances_[j * 4], param.code_type(),
                               param.encode_variance_in_target(), t, what_);
  }
  return decoded;
}

template <typename T>
std::vector<MultiBoxLossLayer::ClassMatches> MultiBoxLossLayer::MatchImage(
    const T* loc, const std::vector<GroundTruth>& gt) const {
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  const bool per_prediction = param.match_type() == MultiBoxLossParameter::PER_PREDICTION;
  // Matches `predictions` against the ground truth of `label` (-1: all of it), with indices
  // into the whole ground truth.
  const auto match = [&](const std::vector<Box>& predictions, int label) {
    std::vector<Box> gt_boxes;
    std::vector<int> gt_index;
    for (int g = 0; g < static_cast<int>(gt.size()); ++g) {
      if (label != -1 && gt[g].label != label) continue;
      gt_boxes.push_back(gt[g].box);
      gt_index.push_back(g);
    }
    boxes::Matches m = boxes::Match(gt_boxes, predictions, per_prediction,
                                    param.overlap_threshold(), param.ignore_cross_boundary_bbox());
    ClassMatches result;
    result.label = label;
    result.overlaps = std::move(m.overlaps);
    result.indices = std::move(m.indices);
    for (int& index : result.indices)
      if (index != -1) index = gt_index[index];
    return result;
  };
  std::vector<ClassMatches> matches;
  if (!param.use_prior_for_matching()) {
    for (int c = 0; c < loc_classes_; ++c) {
      if (!share_location_ && c == background_label_id_) continue;
      matches.push_back(match(DecodeClass(loc, c), share_location_ ? -1 : c));
    }
    return matches;
  }
  ClassMatches all = match(priors_, -1);
  if (share_location_) {
    matches.push_back(std::move(all));
    return matches;
  }
  // One prior matching serves the location class of the matched box's label.
  for (int c = 0; c < loc_classes_; ++c) {
    if (c == background_label_id_) continue;
    ClassMatches of_class;
    of_class.label = c;
    of_class.overlaps = all.overlaps;
    of_class.indices.assign(num_priors_, -1);
    for (int j = 0; j < num_priors_; ++j)
      if (all.indices[j] != -1 && gt[all.indices[j]].label == c)
        of_class.indices[j] = all.indices[j];
    matches.push_back(std::move(of_class));
  }
  return matches;
}

template <typename T>
double MultiBoxLossLayer::LocLoss(const T* pred, int j, const Box& gt, double grad[4]) const {
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  const float* variance = &variances_[j * 4];
  float target[4];
  boxes::Encode(priors_[j], variance, param.code_type(), param.encode_variance_in_target(), gt,
                target, what_);
  // bp_inside: coordinates of the matched box outside the image get no loss (SSD puts the target
  // in place of the prediction).
  bool inside[4] = {true, true, true, true};
  if (param.bp_inside()) {
    Box matched = priors_[j];
    if (!param.use_prior_for_matching()) {
      const float t[4] = {static_cast<float>(pred[0]), static_cast<float>(pred[1]),
                          static_cast<float>(pred[2]), static_cast<float>(pred[3])};
      matched = boxes::Decode(priors_[j], variance, param.code_type(),
                              param.encode_variance_in_target(), t, what_);
    }
    const float coords[4] = {matched.xmin, matched.ymin, matched.xmax, matched.ymax};
    for (int k = 0; k < 4; ++k) inside[k] = coords[k] >= 0 && coords[k] <= 1;
  }
  double loss = 0;
  for (int k = 0; k < 4; ++k) {
    grad[k] = 0;
    if (!inside[k]) continue;
    double scale = 1;
    if (param.encode_variance_in_target()) {
      if (!(variance[k] > 0))
        throw RuntimeError(ErrorPrefix() +
                           StrCat("prior ", j, " has variance ", variance[k],
                                  "; encode_variance_in_target divides by it, so it must be > 0"));
      scale = 1.0 / variance[k];
    }
    const double d = (static_cast<double>(pred[k]) - target[k]) * scale;
    if (param.loc_loss_type() == MultiBoxLossParameter::SMOOTH_L1 && std::abs(d) >= 1) {
      loss += std::abs(d) - 0.5;
      grad[k] = (d > 0 ? 1 : -1) * scale;
    } else {
      loss += 0.5 * d * d;
      grad[k] = d * scale;
    }
  }
  return loss;
}

template <typename T>
double MultiBoxLossLayer::ConfLoss(const T* x, int label, double* grad) const {
  double loss = 0;
  if (layer_param_.multibox_loss_param().conf_loss_type() == MultiBoxLossParameter::SOFTMAX) {
    const double max_x = *std::max_element(x, x + num_classes_);
    double sum = 0;
    for (int c = 0; c < num_classes_; ++c) sum += (grad[c] = std::exp(x[c] - max_x));
    for (int c = 0; c < num_classes_; ++c) grad[c] /= sum;
    loss = -std::log(std::max(grad[label], static_cast<double>(FLT_MIN)));
    grad[label] -= 1;
    return loss;
  }
  // Sigmoid cross-entropy in the stable form of Caffe's SigmoidCrossEntropyLoss.
  for (int c = 0; c < num_classes_; ++c) {
    const double input = x[c];
    const double target = c == label ? 1 : 0;
    const double positive = input >= 0 ? 1 : 0;
    loss -= input * (target - positive) - std::log(1 + std::exp(input - 2 * input * positive));
    grad[c] = 1 / (1 + std::exp(-input)) - target;
  }
  return loss;
}

template <typename T>
void MultiBoxLossLayer::MineImage(const T* loc, const T* conf, const std::vector<GroundTruth>& gt,
                                  std::vector<ClassMatches>* matches,
                                  std::vector<int>* negatives) const {
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  const bool hard_example = mining_type_ == MultiBoxLossParameter::HARD_EXAMPLE;
  // Mining needs share_location (LayerSetUp), so there is one ClassMatches.
  ClassMatches& m = matches->front();
  // Per prior: its confidence loss (against its match's label, else the background) and, for
  // HARD_EXAMPLE, its localization loss; float, as SSD ranks them.
  std::vector<float> loss(num_priors_);
  std::vector<double> grad(num_classes_);
  for (int j = 0; j < num_priors_; ++j) {
    const int label = m.indices[j] != -1 ? gt[m.indices[j]].label : background_label_id_;
    double value = ConfLoss(conf + static_cast<int64_t>(j) * num_classes_, label, grad.data());
    if (hard_example && m.indices[j] != -1) {
      double loc_grad[4];
      value += LocLoss(loc + static_cast<int64_t>(j) * 4, j, gt[m.indices[j]].box, loc_grad);
    }
    loss[j] = static_cast<float>(value);
  }
  std::vector<int> candidates;
  int num_pos = 0;
  for (int j = 0; j < num_priors_; ++j) {
    num_pos += m.indices[j] != -1;
    if (hard_example || (m.indices[j] == -1 && m.overlaps[j] < param.neg_overlap()))
      candidates.push_back(j);
  }
  int num_sel = static_cast<int>(candidates.size());
  if (hard_example)
    num_sel = std::min(num_sel, param.sample_size());
  else
    num_sel = std::min(num_sel, static_cast<int>(num_pos * param.neg_pos_ratio()));
  std::vector<int> selected;
  if (nms_threshold_ > 0) {
    std::vector<Box> candidate_boxes;
    std::vector<float> candidate_loss;
    const std::vector<Box> decoded = param.use_prior_for_nms() ? priors_ : DecodeClass(loc, 0);
    for (int j : candidates) {
      candidate_boxes.push_back(decoded[j]);
      candidate_loss.push_back(loss[j]);
    }
    const std::vector<int> kept =
        boxes::Nms(candidate_boxes, candidate_loss, -FLT_MAX, nms_threshold_, 1, nms_top_k_);
    for (int n = 0; n < std::min(num_sel, static_cast<int>(kept.size())); ++n)
      selected.push_back(candidates[kept[n]]);
  } else {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](int a, int b) { return loss[a] > loss[b]; });
    selected.assign(candidates.begin(), candidates.begin() + num_sel);
  }
  std::vector<bool> is_selected(num_priors_, false);
  for (int j : selected) is_selected[j] = true;
  for (int j = 0; j < num_priors_; ++j) {
    if (m.indices[j] != -1) {
      if (hard_example && !is_selected[j]) m.indices[j] = -1;
    } else if (is_selected[j]) {
      negatives->push_back(j);
    }
  }
}

template <typename T>
void MultiBoxLossLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  what_ = ErrorPrefix();
  const T* loc = bottom[0]->cpu_data<T>();
  const T* conf = bottom[1]->cpu_data<T>();
  const std::vector<float> prior_data = FloatValues(*bottom[2]);
  priors_.resize(num_priors_);
  for (int j = 0; j < num_priors_; ++j) {
    const float* p = &prior_data[j * 4];
    priors_[j] = Box{p[0], p[1], p[2], p[3]};
  }
  variances_.assign(prior_data.begin() + num_priors_ * 4, prior_data.end());
  const std::vector<std::vector<GroundTruth>> all_gt = ReadGroundTruth(*bottom[3]);
  const int64_t loc_dim = bottom[0]->count(1);
  const int64_t conf_dim = bottom[1]->count(1);

  // Matching, then mining, per image.
  std::vector<std::vector<ClassMatches>> all_matches(num_);
  std::vector<std::vector<int>> all_negatives(num_);
  for (int i = 0; i < num_; ++i) {
    if (all_gt[i].empty()) continue;
    all_matches[i] = MatchImage(loc + i * loc_dim, all_gt[i]);
    if (mining_type_ != MultiBoxLossParameter::NONE)
      MineImage(loc + i * loc_dim, conf + i * conf_dim, all_gt[i], &all_matches[i],
                &all_negatives[i]);
  }

  // Localization loss over the positives.
  const MultiBoxLossParameter& param = layer_param_.multibox_loss_param();
  loc_offsets_.clear();
  loc_grads_.clear();
  double loc_loss = 0;
  for (int i = 0; i < num_; ++i) {
    for (const ClassMatches& m : all_matches[i]) {
      const int loc_class = share_location_ ? 0 : m.label;
      for (int j = 0; j < num_priors_; ++j) {
        if (m.indices[j] == -1) continue;
        const int64_t offset =
            i * loc_dim + (static_cast<int64_t>(j) * loc_classes_ + loc_class) * 4;
        double grad[4];
        loc_loss += LocLoss(loc + offset, j, all_gt[i][m.indices[j]].box, grad);
        loc_offsets_.push_back(offset);
        loc_grads_.insert(loc_grads_.end(), grad, grad + 4);
      }
    }
  }
  num_matches_ = static_cast<int>(loc_offsets_.size());

  // Confidence loss over the positives and the negatives (every prior without mining).
  std::vector<std::pair<int64_t, int>> conf_items;  // (offset, label)
  num_negatives_ = 0;
  if (mining_type_ != MultiBoxLossParameter::NONE) {
    for (int i = 0; i < num_; ++i) {
      for (const ClassMatches& m : all_matches[i])
        for (int j = 0; j < num_priors_; ++j)
          if (m.indices[j] != -1)
            conf_items.emplace_back(i * conf_dim + static_cast<int64_t>(j) * num_classes_,
                                    all_gt[i][m.indices[j]].label);
      for (int j : all_negatives[i])
        conf_items.emplace_back(i * conf_dim + static_cast<int64_t>(j) * num_classes_,
                                background_label_id_);
      num_negatives_ += static_cast<int>(all_negatives[i].size());
    }
  } else {
    for (int i = 0; i < num_; ++i) {
      std::vector<int> labels(num_priors_, background_label_id_);
      // A prior matched in several location classes takes the last one's label (as SSD).
      for (const ClassMatches& m : all_matches[i])
        for (int j = 0; j < num_priors_; ++j)
          if (m.indices[j] != -1) labels[j] = all_gt[i][m.indices[j]].label;
      for (int j = 0; j < num_priors_; ++j) {
        conf_items.emplace_back(i * conf_dim + static_cast<int64_t>(j) * num_classes_, labels[j]);
        num_negatives_ += labels[j] == background_label_id_;
      }
    }
  }
  conf_offsets_.resize(conf_items.size());
  conf_grads_.resize(conf_items.size() * num_classes_);
  double conf_loss = 0;
  for (size_t n = 0; n < conf_items.size(); ++n) {
    conf_offsets_[n] = conf_items[n].first;
    conf_loss +=
        ConfLoss(conf + conf_items[n].first, conf_items[n].second, &conf_grads_[n * num_classes_]);
  }

  normalizer_ = LossLayer::Normalizer(normalization_, num_, num_priors_, num_matches_);
  double loss = 0;
  if (use_loc_loss_) loss += param.loc_weight() * loc_loss / normalizer_;
  if (use_conf_loss_) loss += conf_loss / normalizer_;
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), U, top[0]->mutable_cpu_data<U>()[0] = static_cast<U>(loss));
}

template <typename T>
void MultiBoxLossLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                                 const BlobVec& bottom) {
  double top_diff = 0;
  CREMA_DISPATCH_FLOAT(top[0]->dtype(), U, top_diff = top[0]->cpu_diff<U>()[0]);
  if (propagate_down[0]) {
    T* diff = bottom[0]->mutable_cpu_diff<T>();
    std::fill(diff, diff + bottom[0]->count(), T(0));
    const double scale =
        use_loc_loss_ ? top_diff * layer_param_.multibox_loss_param().loc_weight() / normalizer_
                      : 0;
    for (size_t n = 0; n < loc_offsets_.size(); ++n)
      for (int k = 0; k < 4; ++k)
        diff[loc_offsets_[n] + k] += static_cast<T>(scale * loc_grads_[n * 4 + k]);
  }
  if (propagate_down[1]) {
    T* diff = bottom[1]->mutable_cpu_diff<T>();
    std::fill(diff, diff + bottom[1]->count(), T(0));
    const double scale = use_conf_loss_ ? top_diff / normalizer_ : 0;
    for (size_t n = 0; n < conf_offsets_.size(); ++n)
      for (int c = 0; c < num_classes_; ++c)
        diff[conf_offsets_[n] + c] += static_cast<T>(scale * conf_grads_[n * num_classes_ + c]);
  }
}

void MultiBoxLossLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Forward<T>(bottom, top));
}

void MultiBoxLossLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  if (propagate_down[2])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the prior input (bottom[2])");
  if (propagate_down[3])
    throw ConfigError(ErrorPrefix() + "cannot backpropagate to the ground truth input (bottom[3])");
  if (!propagate_down[0] && !propagate_down[1]) return;
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(MultiBoxLoss, MultiBoxLossLayer);

}  // namespace crema
