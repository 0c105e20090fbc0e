#pragma once
// Mean average precision over the rows of DetectionEvaluate layers, as Caffe-SSD's solver test
// (eval_type "detection") computes it; the solver's test and `crema test` both use it.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crema/blob.hpp"
#include "crema/net.hpp"

namespace crema {

// Gathers DetectionEvaluate's rows over batches: [-1, label, positives, -1, -1] adds to a class's
// ground truth count; [image, label, score, tp, fp] is one ranked detection of the class (a true
// positive when tp is 1), except that (tp, fp) = (0, 0) (a match with a difficult box that is
// not evaluated, or an unused row) is skipped.
class DetectionEvalAccumulator {
 public:
  // One batch: a DetectionEvaluate top, (..., R, 5).
  void Add(const Blob& rows);
  int batches() const { return batches_; }

  struct ClassAp {
    int label;
    int positives;   // ground truth boxes over all batches
    int detections;  // ranked detections (true and false positives)
    double ap;
  };
  struct Result {
    double map = 0;
    std::vector<ClassAp> classes;  // labels ascending
  };
  // The average precision of every class with a positives row (boxes::AveragePrecision; 0 without
  // detections or ground truth) and their mean, over all those classes as Caffe-SSD: a class
  // without ground truth in the test set counts as 0. ConfigError for an unknown ap_version.
  Result Compute(const std::string& ap_version) const;

 private:
  std::map<int, int> num_positives_;
  std::map<int, std::vector<std::pair<float, int>>> detections_;  // (score, true positive)
  int batches_ = 0;
};

// The outputs of `net` that a DetectionEvaluate layer makes, as indices into
// net.output_blobs().
std::vector<int> DetectionEvalOutputs(const Net& net);

}  // namespace crema
