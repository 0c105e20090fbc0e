#include "layers/detection_output/detection_output_layer.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <utility>

#include "crema/layer_registry.hpp"
#include "io/boxes.hpp"

namespace crema {

using boxes::Box;

void DetectionOutputLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const DetectionOutputParameter& param = layer_param_.detection_output_param();
  CREMA_CHECK_PARAM(param.has_num_classes(), "detection_output_param.num_classes", "must be given");
  CREMA_CHECK_PARAM(param.num_classes() >= 1, "detection_output_param.num_classes",
                    "must be >= 1, got ", param.num_classes());
  num_classes_ = static_cast<int>(param.num_classes());
  share_location_ = param.share_location();
  num_loc_classes_ = share_location_ ? 1 : num_classes_;
  background_label_id_ = param.background_label_id();
  code_type_ = param.code_type();
  variance_encoded_in_target_ = param.variance_encoded_in_target();
  keep_top_k_ = param.keep_top_k();
  confidence_threshold_ =
      param.has_confidence_threshold() ? param.confidence_threshold() : -FLT_MAX;
  const NonMaximumSuppressionParameter& nms = param.nms_param();
  nms_threshold_ = nms.nms_threshold();
  CREMA_CHECK_PARAM(nms_threshold_ >= 0, "detection_output_param.nms_param.nms_threshold",
                    "must be >= 0, got ", nms_threshold_);
  eta_ = nms.eta();
  CREMA_CHECK_PARAM(eta_ > 0 && eta_ <= 1, "detection_output_param.nms_param.eta",
                    "must be in (0, 1], got ", eta_);
  top_k_ = nms.has_top_k() ? nms.top_k() : -1;
  // SSD's deploy prototxts carry the save_output_param of the test net they were cut from;
  // Caffe-SSD writes result files from it. crema does not: the detections are in the top.
  if (!param.save_output_param().output_directory().empty()) {
    LOG(WARNING) << "Layer " << name() << " (DetectionOutput): "
                 << "detection_output_param.save_output_param ignored: crema does not write "
                 << "detection files (output_directory \""
                 << param.save_output_param().output_directory() << "\"); read the layer's top";
  }
  CREMA_CHECK_PARAM(!param.visualize(), "detection_output_param.visualize",
                    "is not supported: crema does not draw detections");
}

void DetectionOutputLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& loc = *bottom[0];
  const Blob& conf = *bottom[1];
  const Blob& prior = *bottom[2];
  CREMA_CHECK_SHAPE(loc.num_axes() >= 2 && conf.num_axes() >= 2,
                    "DetectionOutput needs loc and conf bottoms with at least 2 axes, got ",
                    loc.shape_string(), " and ", conf.shape_string());
  CREMA_CHECK_SHAPE(loc.shape(0) == conf.shape(0), "loc ", loc.shape_string(), " and conf ",
                    conf.shape_string(), " must have the same number of images");
  std::string problem;
  num_priors_ = boxes::NumPriors(loc, conf, prior, num_loc_classes_, num_classes_, &problem);
  CREMA_CHECK_SHAPE(problem.empty(), problem);
  CREMA_CHECK_SHAPE(top[0] != bottom[0] && top[0] != bottom[1] && top[0] != bottom[2],
                    "DetectionOutput does not allow in-place computation");
  // The number of kept boxes is known only after Forward; SSD starts with one row.
  top[0]->Reshape({1, 1, 1, 7});
}

template <typename T>
void DetectionOutputLayer::ForwardT(const BlobVec& bottom, Blob* top) {
  const int num = bottom[0]->shape(0);
  const T* loc_data = bottom[0]->cpu_data<T>();
  const T* conf_data = bottom[1]->cpu_data<T>();
  const T* prior_data = bottom[2]->cpu_data<T>();
  const int num_priors = num_priors_;

  std::vector<Box> priors(num_priors);
  std::vector<float> variances(static_cast<size_t>(num_priors) * 4);
  for (int p = 0; p < num_priors; ++p) {
    Box& b = priors[p];
    b.xmin = static_cast<float>(prior_data[p * 4]);
    b.ymin = static_cast<float>(prior_data[p * 4 + 1]);
    b.xmax = static_cast<float>(prior_data[p * 4 + 2]);
    b.ymax = static_cast<float>(prior_data[p * 4 + 3]);
    for (int k = 0; k < 4; ++k)
      variances[p * 4 + k] =
          static_cast<float>(prior_data[(static_cast<int64_t>(num_priors) + p) * 4 + k]);
  }

  // Per image: decoded boxes per location class, scores per class, kept indices per label.
  std::vector<std::vector<std::vector<Box>>> all_boxes(num);
  std::vector<std::vector<std::vector<float>>> all_scores(num);
  std::vector<std::map<int, std::vector<int>>> all_kept(num);
  int64_t num_kept = 0;
  for (int i = 0; i < num; ++i) {
    auto& decoded = all_boxes[i];
    decoded.resize(num_loc_classes_);
    const T* loc = loc_data + static_cast<int64_t>(i) * num_priors * num_loc_classes_ * 4;
    for (int c = 0; c < num_loc_classes_; ++c) {
      // Without shared locations, the background's boxes are never used.
      if (!share_location_ && c == background_label_id_) continue;
      decoded[c].resize(num_priors);
      for (int p = 0; p < num_priors; ++p) {
        const T* pred = loc + (static_cast<int64_t>(p) * num_loc_classes_ + c) * 4;
        const float offsets[4] = {static_cast<float>(pred[0]), static_cast<float>(pred[1]),
                                  static_cast<float>(pred[2]), static_cast<float>(pred[3])};
        decoded[c][p] = boxes::Decode(priors[p], &variances[p * 4], code_type_,
                                      variance_encoded_in_target_, offsets, ErrorPrefix());
      }
    }
    auto& scores = all_scores[i];
    scores.assign(num_classes_, std::vector<float>(num_priors));
    const T* conf = conf_data + static_cast<int64_t>(i) * num_priors * num_classes_;
    for (int p = 0; p < num_priors; ++p)
      for (int c = 0; c < num_classes_; ++c)
        scores[c][p] = static_cast<float>(conf[static_cast<int64_t>(p) * num_classes_ + c]);

    std::map<int, std::vector<int>> kept;
    int64_t num_det = 0;
    for (int c = 0; c < num_classes_; ++c) {
      if (c == background_label_id_) continue;
      kept[c] = boxes::Nms(decoded[share_location_ ? 0 : c], scores[c], confidence_threshold_,
                           nms_threshold_, eta_, top_k_);
      num_det += static_cast<int64_t>(kept[c].size());
    }
    if (keep_top_k_ > -1 && num_det > keep_top_k_) {
      // (score, (label, prior)) in label order, then NMS order; a stable sort keeps that order
      // among equal scores.
      std::vector<std::pair<float, std::pair<int, int>>> ranked;
      for (const auto& [label, indices] : kept)
        for (int idx : indices) ranked.push_back({scores[label][idx], {label, idx}});
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      ranked.resize(keep_top_k_);
      for (const auto& entry : ranked)
        all_kept[i][entry.second.first].push_back(entry.second.second);
      num_kept += keep_top_k_;
    } else {
      all_kept[i] = std::move(kept);
      num_kept += num_det;
    }
  }

  if (num_kept == 0) {
    // SSD's placeholder: one row per image, the image id then -1s.
    top->Reshape({1, 1, num, 7});
    T* top_data = top->mutable_cpu_data<T>();
    std::fill(top_data, top_data + top->count(), T(-1));
    for (int i = 0; i < num; ++i) top_data[i * 7] = static_cast<T>(i);
    return;
  }
  top->Reshape({1, 1, static_cast<int>(num_kept), 7});
  T* row = top->mutable_cpu_data<T>();
  for (int i = 0; i < num; ++i) {
    for (const auto& [label, indices] : all_kept[i]) {
      const std::vector<Box>& decoded = all_boxes[i][share_location_ ? 0 : label];
      for (int idx : indices) {
        const Box& b = decoded[idx];
        row[0] = static_cast<T>(i);
        row[1] = static_cast<T>(label);
        row[2] = static_cast<T>(all_scores[i][label][idx]);
        row[3] = static_cast<T>(b.xmin);
        row[4] = static_cast<T>(b.ymin);
        row[5] = static_cast<T>(b.xmax);
        row[6] = static_cast<T>(b.ymax);
        row += 7;
      }
    }
  }
}

void DetectionOutputLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T, ForwardT<T>(bottom, top[0]));
}

void DetectionOutputLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                       const BlobVec& bottom) {
  // Inference only: any gradient asked for is zero.
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) bottom[i]->SetDiffZero();
}

CREMA_REGISTER_LAYER(DetectionOutput, DetectionOutputLayer);

}  // namespace crema
