#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// SSD's detection head at inference: decodes box predictions against the priors, runs
// per-class non-maximum suppression and keeps the best boxes of each image.
// Bottoms: loc (N, P*L*4, ...) with L = 1 when share_location, else num_classes; conf
// (N, P*num_classes, ...), already softmaxed; prior (1, 2, P*4) from PriorBox (boxes, then
// variances). Top: (1, 1, K, 7), one row [image_id, label, score, xmin, ymin, xmax, ymax] per
// kept box, images in order, then labels ascending, then by score (descending). When no image
// keeps a box, SSD's placeholder: (1, 1, N, 7) with row i = [i, -1, -1, -1, -1, -1, -1].
// Per image and class c != background_label_id: the scores > confidence_threshold, sorted
// descending (ties keep prior order), the first nms_param.top_k of them, then greedy NMS: a box
// is kept when its Jaccard overlap with every kept box is <= the threshold, which starts at
// nms_threshold and is multiplied by eta after each kept box while it is > 0.5. With
// keep_top_k >= 0, at most keep_top_k boxes per image survive, by score across classes.
// Decoding (code_type), with prior p, variance v and prediction t; v is taken as 1 when
// variance_encoded_in_target:
//   CORNER       [p.xmin + v0 t0, p.ymin + v1 t1, p.xmax + v2 t2, p.ymax + v3 t3]
//   CENTER_SIZE  centre (p.cx + v0 t0 p.w, p.cy + v1 t1 p.h), size (p.w e^(v2 t2), p.h e^(v3 t3))
//   CORNER_SIZE  [p.xmin + v0 t0 p.w, p.ymin + v1 t1 p.h, p.xmax + v2 t2 p.w, p.ymax + v3 t3 p.h]
// Arithmetic is in float, as SSD's CPU code. No gradient (inference only).
// Params: detection_output_param { num_classes (required), share_location (default true),
// background_label_id (default 0), nms_param { nms_threshold (default 0.3), top_k, eta (default
// 1) }, code_type (default CORNER), variance_encoded_in_target (default false), keep_top_k
// (default -1: all), confidence_threshold (default: none) }. save_output_param is ignored with a
// warning (crema writes no detection files; SSD's deploy nets carry one); visualize is rejected:
// crema draws nothing.
class DetectionOutputLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "DetectionOutput"; }
  // Device-neutral: sorting, NMS and keep_top_k are sequential host logic (on the host in SSD's
  // GPU path too), so the CPU code reads loc, conf and priors back once per Forward and writes
  // the small table of kept boxes, which a GPU consumer uploads.
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, Blob* top);

  int num_classes_ = 0;
  bool share_location_ = true;
  int num_loc_classes_ = 1;
  int background_label_id_ = 0;
  PriorBoxParameter::CodeType code_type_ = PriorBoxParameter::CORNER;
  bool variance_encoded_in_target_ = false;
  int keep_top_k_ = -1;
  float confidence_threshold_ = 0;
  float nms_threshold_ = 0.3f;
  float eta_ = 1;
  int top_k_ = -1;
  int num_priors_ = 0;
};

}  // namespace crema
