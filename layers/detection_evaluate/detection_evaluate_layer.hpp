#pragma once
#include <utility>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// SSD's evaluation of detections against the ground truth, the rows that the solver's detection
// test (eval_type "detection") and `crema test` turn into average precision
// (solvers/detection_eval.hpp).
// Bottoms: detections (1, 1, D, 7) from DetectionOutput, rows [image_id, label, score, xmin, ymin,
// xmax, ymax]; ground truth (1, 1, G, 8) from AnnotatedData, rows [item_id, label, instance_id,
// xmin, ymin, xmax, ymax, difficult], read up to the first item_id -1 (AnnotatedData's
// placeholder). Top: (1, 1, C + V, 5), C the classes other than background_label_id, V the
// detection rows whose label is not -1:
//   one row per class c, ascending: [-1, c, positives, -1, -1], positives = c's ground truth
//   boxes in the batch (the difficult ones only with evaluate_difficult_gt);
//   one row per detection, images ascending, then labels ascending: [image_id, label, score,
//   tp, fp]. Per image and label with ground truth, the detections in descending score each take
//   the ground truth box of that image and label they overlap most (Jaccard): a true positive
//   (1, 0) when the overlap is >= overlap_threshold and no higher-scored detection took the box,
//   else a false positive (0, 1); a detection whose best box is difficult, without
//   evaluate_difficult_gt, is (0, 0): neither, ignored by the evaluation. Detections of an image
//   or label without ground truth are false positives (input order).
// Rows left over (DetectionOutput's placeholders: image_id -1) stay all zero, which the
// evaluation ignores as well.
// name_size_file ("name height width" per line, in the order of the test images): the boxes are
// clipped to [0, 1] and scaled to that image's size (through resize_param, undoing the data
// layer's resize) and overlaps are then in pixels, as Caffe-SSD: width = xmax - xmin + 1. The
// file is walked one image per image id found among the detections, across Forward calls,
// wrapping at its end (SSD's count). Arithmetic in float, as SSD. No gradient.
// Params: detection_evaluate_param { num_classes (required), background_label_id (default 0),
// overlap_threshold (default 0.5, > 0), evaluate_difficult_gt (default true), name_size_file,
// resize_param }.
class DetectionEvaluateLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "DetectionEvaluate"; }
  // Device-neutral: matching is sequential host logic (SSD has no GPU code for it); the CPU code
  // reads both small tables back once per Forward.
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  bool HasGradient() const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, Blob* top);

  int num_classes_ = 0;
  int background_label_id_ = 0;
  float overlap_threshold_ = 0.5f;
  bool evaluate_difficult_gt_ = true;
  // (height, width) per test image of name_size_file; empty: overlaps in normalized coordinates.
  std::vector<std::pair<int, int>> sizes_;
  // The next image's line in sizes_.
  size_t count_ = 0;
};

}  // namespace crema
