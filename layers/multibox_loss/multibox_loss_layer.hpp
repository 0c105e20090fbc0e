#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "crema/layer.hpp"
#include "io/boxes.hpp"

namespace crema {

// SSD's training loss (weiliu89/caffe, branch ssd): matches priors to the ground truth, mines
// negatives, and sums a localization loss over the matched priors and a confidence loss over the
// matched and mined ones.
// Bottoms: loc (N, P*L*4, ...) with L = 1 when share_location, else num_classes; conf
// (N, P*num_classes, ...); prior (1, 2, P*4) from PriorBox (boxes, then variances); ground truth
// (..., G, 8), one row [item_id, label, instance_id, xmin, ymin, xmax, ymax, difficult] per box
// (item_id -1: a placeholder row, skipped). Top: the scalar loss. Gradients reach loc and conf
// only; propagate_down true for prior or ground truth is a ConfigError.
// Per image with ground truth (difficult boxes skipped unless use_difficult_gt; with
// map_object_to_agnostic every label becomes background_label_id + 1):
//   matching  boxes::Match of the priors (use_prior_for_matching) or of the decoded predictions
//             of each location class (the ground truth of that class only, when !share_location)
//             against the ground truth: BIPARTITE, or PER_PREDICTION with overlap_threshold;
//             ignore_cross_boundary_bbox. The matched priors are the positives.
//   mining    mining_type (legacy do_neg_mining: true = MAX_NEGATIVE, false = NONE):
//             MAX_NEGATIVE  of the unmatched priors whose best overlap is < neg_overlap, the
//                           floor(num_pos * neg_pos_ratio) with the largest confidence loss
//                           against the background label are the negatives;
//             HARD_EXAMPLE  every prior is ranked by its confidence plus localization loss; the
//                           first sample_size (after NMS over the priors, or the decoded
//                           predictions with use_prior_for_nms false, when nms_param has an
//                           nms_threshold > 0) are kept: matched ones stay positives, unmatched
//                           ones become negatives, the other matched ones are dropped;
//             NONE          every prior of every image counts (unmatched: background), images
//                           without ground truth included.
//             Images without ground truth have no positives and, when mining, no negatives.
// Losses, with t = boxes::Encode(prior, variance, gt, code_type, encode_variance_in_target) and
// d = (pred - t) (divided by the variance when encode_variance_in_target, as SSD):
//   loc   SMOOTH_L1: sum 0.5 d^2 if |d| < 1 else |d| - 0.5; L2: sum 0.5 d^2 (SSD's EuclideanLoss
//         over one item), over the 4 coordinates of every positive. With bp_inside (corner
//         codings), a coordinate of the prior (or of the decoded prediction when matching with
//         predictions) outside [0, 1] contributes nothing.
//   conf  SOFTMAX: -log(max(softmax(x)[label], FLT_MIN)) per positive (its ground truth label)
//         and negative (background_label_id); LOGISTIC: sigmoid cross-entropy summed over the
//         classes against the one-hot label.
// loss = (loc_weight * loc + conf) / normalizer, normalizer = max(1, n) by loss_param
// normalization: VALID (default) the number of positives, FULL N*P, BATCH_SIZE N, NONE 1 (legacy
// normalize: true = VALID, false = BATCH_SIZE). As SSD, a term whose propagate_down is given
// false in the layer's prototxt is left out of the loss.
// Backward: the derivative of that loss at the positives' loc predictions and the selected
// priors' conf scores (times the top diff), zero elsewhere. Matching and mining happen in Forward
// only; Backward reuses them. Differences from SSD: with encode_variance_in_target the loc
// gradient carries the 1/variance of the loss (SSD drops it); unmatched priors under NONE with
// LOGISTIC get a one-hot background target (SSD's buffer offsets are wrong there); nms_param
// without top_k keeps all candidates (SSD keeps none); ties in the rankings keep prior order.
// Params: multibox_loss_param { num_classes (required), loc_loss_type (SMOOTH_L1), conf_loss_type
// (SOFTMAX), loc_weight (1), share_location (true), match_type (PER_PREDICTION),
// overlap_threshold (0.5), use_prior_for_matching (true), background_label_id (0),
// use_difficult_gt (true), mining_type (MAX_NEGATIVE), neg_pos_ratio (3), neg_overlap (0.5),
// code_type (CORNER), encode_variance_in_target (false), map_object_to_agnostic (false),
// ignore_cross_boundary_bbox (false), bp_inside (false), nms_param { nms_threshold, top_k } (eta
// unused, as SSD), sample_size (64), use_prior_for_nms (false) }; loss_param { normalization }.
// Mining needs share_location (as SSD). A ground-truth label that is the background, negative,
// or (without map_object_to_agnostic) >= num_classes, or an item_id outside [0, N), is a
// RuntimeError.
// Device-neutral: matching and mining are sequential host logic (on the host in SSD's GPU path
// too), so the CPU code runs on the host copies of the bottoms in a GPU net as well.
class MultiBoxLossLayer final : public LossLayer {
 public:
  using LossLayer::LossLayer;
  const char* type() const override { return "MultiBoxLoss"; }
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 4; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index < 2; }

  // The number of positives (matched priors) and negatives of the last Forward.
  int num_matches() const { return num_matches_; }
  int num_negatives() const { return num_negatives_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  struct GroundTruth {
    boxes::Box box;
    int label = 0;
  };
  // The matches of one location class of one image (class -1 when share_location).
  struct ClassMatches {
    int label = -1;
    std::vector<int> indices;     // per prior: the ground truth index, or -1
    std::vector<float> overlaps;  // per prior: its best overlap with the ground truth
  };

  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);
  std::vector<std::vector<GroundTruth>> ReadGroundTruth(const Blob& blob) const;
  template <typename T>
  std::vector<ClassMatches> MatchImage(const T* loc, const std::vector<GroundTruth>& gt) const;
  template <typename T>
  std::vector<boxes::Box> DecodeClass(const T* loc, int loc_class) const;
  // The loc loss of one positive: prior j's prediction `pred` (4 values) against ground truth
  // box `gt`; writes the derivative with respect to pred into grad.
  template <typename T>
  double LocLoss(const T* pred, int j, const boxes::Box& gt, double grad[4]) const;
  // The conf loss of prior scores `x` (num_classes values) for `label`; writes its derivative.
  template <typename T>
  double ConfLoss(const T* x, int label, double* grad) const;
  // Mining of one image with ground truth: updates its matches and appends its negatives.
  template <typename T>
  void MineImage(const T* loc, const T* conf, const std::vector<GroundTruth>& gt,
                 std::vector<ClassMatches>* matches, std::vector<int>* negatives) const;

  int num_classes_ = 0;
  bool share_location_ = true;
  int loc_classes_ = 1;
  int background_label_id_ = 0;
  MultiBoxLossParameter::MiningType mining_type_ = MultiBoxLossParameter::MAX_NEGATIVE;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  bool use_loc_loss_ = true;
  bool use_conf_loss_ = true;
  float nms_threshold_ = 0;
  int nms_top_k_ = -1;
  int num_ = 0;
  int num_priors_ = 0;
  int num_gt_ = 0;

  // Set by Forward for Backward: the priors, and the loss derivatives (before the loss weight,
  // the normalizer and the top diff) at the offsets of the selected predictions.
  std::vector<boxes::Box> priors_;
  std::vector<float> variances_;
  std::vector<int64_t> loc_offsets_;  // 4 values each
  std::vector<double> loc_grads_;
  std::vector<int64_t> conf_offsets_;  // num_classes values each
  std::vector<double> conf_grads_;
  int num_matches_ = 0;
  int num_negatives_ = 0;
  double normalizer_ = 1;
  std::string what_;  // ErrorPrefix(), for the box coding's errors
};

}  // namespace crema
