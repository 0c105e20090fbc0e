#pragma once
// Boxes of object detection (the SSD family), in one place for the layers and tools that use them
// (PriorBox/DetectionOutput decoding, MultiBoxLoss matching and encoding, AnnotatedData crops,
// DetectionEvaluate and the solver's mAP, `crema detect`): geometry in coordinates normalized to
// the image ([0, 1] inside it), prior-box coding, matching of priors to ground truth, non-maximum
// suppression, and average precision. Arithmetic is in float, as the SSD branch's CPU code.
#include <string>
#include <utility>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto.hpp"

namespace crema::boxes {

struct Box {
  float xmin = 0, ymin = 0, xmax = 0, ymax = 0;
};

// Width times height; 0 when the box is inverted (xmax < xmin or ymax < ymin).
float Area(const Box& b);
// The common part of two boxes; an all-zero box when they do not overlap.
Box Intersect(const Box& a, const Box& b);
// Intersection over union (0 when either has no area or they do not overlap).
float Jaccard(const Box& a, const Box& b);
// Each coordinate clamped to [0, 1].
Box Clip(const Box& b);
// Whether any coordinate lies outside [0, 1].
bool CrossesBoundary(const Box& b);
Box FromProto(const NormalizedBBox& b);
void ToProto(const Box& b, NormalizedBBox* out);

// Prior-box coding (code_type), with prior p, variance v (4 values) and prediction t; v is taken
// as 1 when `variance_in_target`:
//   CORNER       [p.xmin + v0 t0, p.ymin + v1 t1, p.xmax + v2 t2, p.ymax + v3 t3]
//   CENTER_SIZE  centre (p.cx + v0 t0 p.w, p.cy + v1 t1 p.h), size (p.w e^(v2 t2), p.h e^(v3 t3))
//   CORNER_SIZE  [p.xmin + v0 t0 p.w, p.ymin + v1 t1 p.h, p.xmax + v2 t2 p.w, p.ymax + v3 t3 p.h]
// Decode computes the box from t; Encode is its inverse (the t that decodes to `box`).
// CENTER_SIZE and CORNER_SIZE need a prior with positive width and height: RuntimeError
// otherwise (`what` names the layer for the message).
using CodeType = PriorBoxParameter::CodeType;
Box Decode(const Box& prior, const float* variance, CodeType code_type, bool variance_in_target,
           const float* t, const std::string& what = "");
void Encode(const Box& prior, const float* variance, CodeType code_type, bool variance_in_target,
            const Box& box, float* t, const std::string& what = "");

// The shapes of SSD's head bottoms (DetectionOutput, MultiBoxLoss): prior (1, 2, P * 4) as
// PriorBox makes it, loc holding P * loc_classes * 4 values per image and conf P * num_classes.
// Returns P; "" in *problem when they agree, else what is wrong.
int NumPriors(const Blob& loc, const Blob& conf, const Blob& prior, int loc_classes,
              int num_classes, std::string* problem);

// Greedy non-maximum suppression over the boxes whose score is > score_threshold: candidates
// sorted by score, descending (ties keep index order), only the first top_k of them when
// top_k >= 0; a candidate is kept when its Jaccard overlap with every kept box is <= the
// threshold, which starts at nms_threshold and is multiplied by eta after each kept box while it
// is > 0.5. Returns the kept indices, best first.
std::vector<int> Nms(const std::vector<Box>& boxes, const std::vector<float>& scores,
                     float score_threshold, float nms_threshold, float eta = 1, int top_k = -1);

// Matching of predictions (priors, or decoded predictions) to ground truth, as SSD's MatchBBox.
// Overlaps are the Jaccard overlaps of each prediction with each ground truth box (predictions
// that cross the image boundary take part in none when ignore_cross_boundary).
//   match_indices[i]: the ground truth index matched to prediction i, or -1.
//   match_overlaps[i]: prediction i's largest overlap with any ground truth box (matched or not).
// First, bipartite: repeatedly the pair of an unmatched prediction and an unmatched ground truth
// with the largest overlap (> 0) is matched, until every ground truth box has one prediction.
// Then, with per_prediction, every unmatched prediction is matched to the ground truth box it
// overlaps most when that overlap is >= overlap_threshold.
struct Matches {
  std::vector<int> indices;
  std::vector<float> overlaps;
};
Matches Match(const std::vector<Box>& ground_truth, const std::vector<Box>& predictions,
              bool per_prediction, float overlap_threshold, bool ignore_cross_boundary = false);

// Average precision of one class from its detections, as (score, 1) for a true positive and
// (score, 0) for a false positive, against num_positives ground truth boxes. Detections are
// ranked by score (descending; ties keep their order); precision and recall are the cumulative
// ones down the ranking. ap_version:
//   "11point"      mean over recall thresholds 0, 0.1, ..., 1 of the best precision at a recall
//                  >= the threshold (VOC2007)
//   "MaxIntegral"  area under the precision curve made monotone from the right (VOC2012)
//   "Integral"     sum of precision times the recall gained at each detection
// 0 when num_positives is 0 or there are no detections. ConfigError for another ap_version.
float AveragePrecision(std::vector<std::pair<float, int>> detections, int num_positives,
                       const std::string& ap_version);
// Checks an ap_version value (ConfigError naming `field` otherwise).
void CheckApVersion(const std::string& ap_version, const std::string& field);

}  // namespace crema::boxes
