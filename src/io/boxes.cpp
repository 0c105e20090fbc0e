#include "io/boxes.hpp"

#include <algorithm>
#include <cmath>

#include "crema/error.hpp"

namespace crema::boxes {

float Area(const Box& b) {
  if (b.xmax < b.xmin || b.ymax < b.ymin) return 0;
  return (b.xmax - b.xmin) * (b.ymax - b.ymin);
}

Box Intersect(const Box& a, const Box& b) {
  if (b.xmin > a.xmax || b.xmax < a.xmin || b.ymin > a.ymax || b.ymax < a.ymin) return Box{};
  return Box{std::max(a.xmin, b.xmin), std::max(a.ymin, b.ymin), std::min(a.xmax, b.xmax),
             std::min(a.ymax, b.ymax)};
}

float Jaccard(const Box& a, const Box& b) {
  if (b.xmin > a.xmax || b.xmax < a.xmin || b.ymin > a.ymax || b.ymax < a.ymin) return 0;
  const float width = std::min(a.xmax, b.xmax) - std::max(a.xmin, b.xmin);
  const float height = std::min(a.ymax, b.ymax) - std::max(a.ymin, b.ymin);
  if (width <= 0 || height <= 0) return 0;
  const float intersection = width * height;
  return intersection / (Area(a) + Area(b) - intersection);
}

Box Clip(const Box& b) {
  auto clamp = [](float v) { return std::max(0.f, std::min(1.f, v)); };
  return Box{clamp(b.xmin), clamp(b.ymin), clamp(b.xmax), clamp(b.ymax)};
}

bool CrossesBoundary(const Box& b) {
  return b.xmin < 0 || b.xmin > 1 || b.ymin < 0 || b.ymin > 1 || b.xmax < 0 || b.xmax > 1 ||
         b.ymax < 0 || b.ymax > 1;
}

Box FromProto(const NormalizedBBox& b) { return Box{b.xmin(), b.ymin(), b.xmax(), b.ymax()}; }

void ToProto(const Box& b, NormalizedBBox* out) {
  out->set_xmin(b.xmin);
  out->set_ymin(b.ymin);
  out->set_xmax(b.xmax);
  out->set_ymax(b.ymax);
}

namespace {

const float kOnes[4] = {1, 1, 1, 1};

void CheckPriorHasArea(const Box& prior, CodeType code_type, const std::string& what) {
  if (prior.xmax - prior.xmin > 0 && prior.ymax - prior.ymin > 0) return;
  throw RuntimeError(StrCat(what, "a prior box has no area (", prior.xmin, ", ", prior.ymin, ", ",
                            prior.xmax, ", ", prior.ymax, "); ",
                            PriorBoxParameter::CodeType_Name(code_type),
                            " coding needs a positive width and height"));
}

}  // namespace

Box Decode(const Box& prior, const float* variance, CodeType code_type, bool variance_in_target,
           const float* t, const std::string& what) {
  const float* v = variance_in_target ? kOnes : variance;
  if (code_type == PriorBoxParameter::CORNER)
    return Box{prior.xmin + v[0] * t[0], prior.ymin + v[1] * t[1], prior.xmax + v[2] * t[2],
               prior.ymax + v[3] * t[3]};
  CheckPriorHasArea(prior, code_type, what);
  const float prior_width = prior.xmax - prior.xmin;
  const float prior_height = prior.ymax - prior.ymin;
  if (code_type == PriorBoxParameter::CORNER_SIZE)
    return Box{prior.xmin + v[0] * t[0] * prior_width, prior.ymin + v[1] * t[1] * prior_height,
               prior.xmax + v[2] * t[2] * prior_width, prior.ymax + v[3] * t[3] * prior_height};
  const float prior_center_x = (prior.xmin + prior.xmax) / 2.;
  const float prior_center_y = (prior.ymin + prior.ymax) / 2.;
  const float center_x = v[0] * t[0] * prior_width + prior_center_x;
  const float center_y = v[1] * t[1] * prior_height + prior_center_y;
  const float width = std::exp(static_cast<double>(v[2] * t[2])) * prior_width;
  const float height = std::exp(static_cast<double>(v[3] * t[3])) * prior_height;
  return Box{static_cast<float>(center_x - width / 2.), static_cast<float>(center_y - height / 2.),
             static_cast<float>(center_x + width / 2.), static_cast<float>(center_y + height / 2.)};
}

void Encode(const Box& prior, const float* variance, CodeType code_type, bool variance_in_target,
            const Box& box, float* t, const std::string& what) {
  const float* v = variance_in_target ? kOnes : variance;
  if (code_type == PriorBoxParameter::CORNER) {
    t[0] = (box.xmin - prior.xmin) / v[0];
    t[1] = (box.ymin - prior.ymin) / v[1];
    t[2] = (box.xmax - prior.xmax) / v[2];
    t[3] = (box.ymax - prior.ymax) / v[3];
    return;
  }
  CheckPriorHasArea(prior, code_type, what);
  const float prior_width = prior.xmax - prior.xmin;
  const float prior_height = prior.ymax - prior.ymin;
  if (code_type == PriorBoxParameter::CORNER_SIZE) {
    t[0] = (box.xmin - prior.xmin) / prior_width / v[0];
    t[1] = (box.ymin - prior.ymin) / prior_height / v[1];
    t[2] = (box.xmax - prior.xmax) / prior_width / v[2];
    t[3] = (box.ymax - prior.ymax) / prior_height / v[3];
    return;
  }
  const float prior_center_x = (prior.xmin + prior.xmax) / 2.;
  const float prior_center_y = (prior.ymin + prior.ymax) / 2.;
  const float width = box.xmax - box.xmin;
  const float height = box.ymax - box.ymin;
  if (!(width > 0 && height > 0))
    throw RuntimeError(StrCat(what, "a ground-truth box has no area (", box.xmin, ", ", box.ymin,
                              ", ", box.xmax, ", ", box.ymax,
                              "); CENTER_SIZE coding takes the logarithm of its size"));
  const float center_x = (box.xmin + box.xmax) / 2.;
  const float center_y = (box.ymin + box.ymax) / 2.;
  t[0] = (center_x - prior_center_x) / prior_width / v[0];
  t[1] = (center_y - prior_center_y) / prior_height / v[1];
  t[2] = std::log(width / prior_width) / v[2];
  t[3] = std::log(height / prior_height) / v[3];
}

int NumPriors(const Blob& loc, const Blob& conf, const Blob& prior, int loc_classes,
              int num_classes, std::string* problem) {
  problem->clear();
  if (!(prior.num_axes() == 3 && prior.shape(1) == 2 && prior.shape(2) % 4 == 0)) {
    *problem = StrCat("the prior bottom must be (1, 2, num_priors * 4) as PriorBox makes it, got ",
                      prior.shape_string());
    return 0;
  }
  const int num_priors = prior.shape(2) / 4;
  if (loc.count(1) != static_cast<int64_t>(num_priors) * loc_classes * 4)
    *problem = StrCat("number of priors must match number of location predictions: loc ",
                      loc.shape_string(), " holds ", loc.count(1), " values per image, expected ",
                      num_priors, " priors * ", loc_classes, " location classes * 4");
  else if (conf.count(1) != static_cast<int64_t>(num_priors) * num_classes)
    *problem = StrCat("number of priors must match number of confidence predictions: conf ",
                      conf.shape_string(), " holds ", conf.count(1), " values per image, expected ",
                      num_priors, " priors * ", num_classes, " classes");
  return num_priors;
}

std::vector<int> Nms(const std::vector<Box>& boxes, const std::vector<float>& scores,
                     float score_threshold, float nms_threshold, float eta, int top_k) {
  std::vector<std::pair<float, int>> candidates;
  for (int i = 0; i < static_cast<int>(scores.size()); ++i)
    if (scores[i] > score_threshold) candidates.emplace_back(scores[i], i);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (top_k > -1 && top_k < static_cast<int>(candidates.size())) candidates.resize(top_k);
  std::vector<int> kept;
  float threshold = nms_threshold;
  for (const auto& candidate : candidates) {
    const int idx = candidate.second;
    bool keep = true;
    for (int k : kept) {
      if (Jaccard(boxes[idx], boxes[k]) > threshold) {
        keep = false;
        break;
      }
    }
    if (!keep) continue;
    kept.push_back(idx);
    if (eta < 1 && threshold > 0.5) threshold *= eta;
  }
  return kept;
}

Matches Match(const std::vector<Box>& ground_truth, const std::vector<Box>& predictions,
              bool per_prediction, float overlap_threshold, bool ignore_cross_boundary) {
  const int num_pred = static_cast<int>(predictions.size());
  const int num_gt = static_cast<int>(ground_truth.size());
  Matches matches;
  matches.indices.assign(num_pred, -1);
  matches.overlaps.assign(num_pred, 0.f);
  if (num_gt == 0) return matches;
  // overlaps[i * num_gt + j], only where > 1e-6 (as SSD keeps them).
  std::vector<float> overlaps(static_cast<size_t>(num_pred) * num_gt, 0.f);
  for (int i = 0; i < num_pred; ++i) {
    if (ignore_cross_boundary && CrossesBoundary(predictions[i])) continue;
    for (int j = 0; j < num_gt; ++j) {
      const float overlap = Jaccard(predictions[i], ground_truth[j]);
      if (overlap > 1e-6f) {
        overlaps[static_cast<size_t>(i) * num_gt + j] = overlap;
        matches.overlaps[i] = std::max(matches.overlaps[i], overlap);
      }
    }
  }
  // Bipartite: the largest remaining overlap between an unmatched prediction and an unmatched
  // ground truth box, until none is left.
  std::vector<bool> gt_done(num_gt, false);
  for (int round = 0; round < num_gt; ++round) {
    int best_i = -1, best_j = -1;
    float best = -1;
    for (int i = 0; i < num_pred; ++i) {
      if (matches.indices[i] != -1) continue;
      for (int j = 0; j < num_gt; ++j) {
        if (gt_done[j]) continue;
        const float overlap = overlaps[static_cast<size_t>(i) * num_gt + j];
        if (overlap > 1e-6f && overlap > best) {
          best = overlap;
          best_i = i;
          best_j = j;
        }
      }
    }
    if (best_i == -1) break;
    matches.indices[best_i] = best_j;
    matches.overlaps[best_i] = best;
    gt_done[best_j] = true;
  }
  if (!per_prediction) return matches;
  for (int i = 0; i < num_pred; ++i) {
    if (matches.indices[i] != -1) continue;
    int best_j = -1;
    float best = -1;
    for (int j = 0; j < num_gt; ++j) {
      const float overlap = overlaps[static_cast<size_t>(i) * num_gt + j];
      if (overlap > 1e-6f && overlap >= overlap_threshold && overlap > best) {
        best = overlap;
        best_j = j;
      }
    }
    if (best_j != -1) {
      matches.indices[i] = best_j;
      matches.overlaps[i] = best;
    }
  }
  return matches;
}

void CheckApVersion(const std::string& ap_version, const std::string& field) {
  if (ap_version == "11point" || ap_version == "MaxIntegral" || ap_version == "Integral") return;
  throw ConfigError(StrCat(field, " must be \"11point\", \"MaxIntegral\" or \"Integral\", got \"",
                           ap_version, "\""));
}

float AveragePrecision(std::vector<std::pair<float, int>> detections, int num_positives,
                       const std::string& ap_version) {
  CheckApVersion(ap_version, "ap_version");
  if (num_positives <= 0 || detections.empty()) return 0;
  std::stable_sort(detections.begin(), detections.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const int n = static_cast<int>(detections.size());
  std::vector<float> precision(n), recall(n);
  int tp = 0;
  for (int i = 0; i < n; ++i) {
    tp += detections[i].second ? 1 : 0;
    precision[i] = static_cast<float>(tp) / (i + 1);
    recall[i] = static_cast<float>(tp) / num_positives;
  }
  float ap = 0;
  if (ap_version == "11point") {
    for (int step = 0; step <= 10; ++step) {
      const float threshold = step / 10.f;
      float best = 0;
      for (int i = 0; i < n; ++i)
        if (recall[i] >= threshold - 1e-6f) best = std::max(best, precision[i]);
      ap += best / 11;
    }
  } else if (ap_version == "MaxIntegral") {
    float best_right = 0;
    std::vector<float> monotone(n);
    for (int i = n - 1; i >= 0; --i) {
      best_right = std::max(best_right, precision[i]);
      monotone[i] = best_right;
    }
    float previous_recall = 0;
    for (int i = 0; i < n; ++i) {
      ap += monotone[i] * (recall[i] - previous_recall);
      previous_recall = recall[i];
    }
  } else {
    float previous_recall = 0;
    for (int i = 0; i < n; ++i) {
      ap += precision[i] * std::fabs(recall[i] - previous_recall);
      previous_recall = recall[i];
    }
  }
  return ap;
}

}  // namespace crema::boxes
