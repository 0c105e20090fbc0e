#include "layers/multibox_loss/multibox_loss_layer.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

namespace {

// Six priors (CORNER boxes, variances 0.1 0.1 0.2 0.2), two images, three classes.
//   p0 (0.1, 0.1, 0.4, 0.4)    p1 (0.15, 0.1, 0.45, 0.4)   p2 (0.5, 0.5, 0.9, 0.9)
//   p3 (0.55, 0.5, 0.95, 0.9)  p4 (0, 0.6, 0.3, 0.9)       p5 (0.6, 0, 0.9, 0.3)
const std::vector<double> kPriors = {
    0.1, 0.1, 0.4, 0.4, 0.15, 0.1, 0.45, 0.4, 0.5, 0.5, 0.9, 0.9, 0.55, 0.5, 0.95, 0.9,
    0,   0.6, 0.3, 0.9, 0.6,  0,   0.9,  0.3, 0.1, 0.1, 0.2, 0.2, 0.1,  0.1, 0.2,  0.2,
    0.1, 0.1, 0.2, 0.2, 0.1,  0.1, 0.2,  0.2, 0.1, 0.1, 0.2, 0.2, 0.1,  0.1, 0.2,  0.2};
// Image 0: class 1 on p0 (IoU 0.875) and p1 (0.818). Image 1: class 2 on p2 (0.905) and p3
// (0.860); a difficult class 1 box on p4 (0.875). Every other overlap is 0.
const std::vector<double> kGroundTruth = {0, 1, 0, 0.12, 0.1,  0.42, 0.4,  0,  //
                                          1, 2, 0, 0.52, 0.5,  0.92, 0.9,  0,  //
                                          1, 1, 1, 0,    0.62, 0.3,  0.92, 1};

// A conformance case on the fixed priors and ground truth (no gradient to them), loc holding
// `loc_values` values per image.
crema::testing::LayerCase FixedBoxes(const std::string& param, int loc_values,
                                     const std::string& name) {
  return crema::testing::LayerCase(param, {{2, loc_values}, {2, 18}, {1, 2, 24}, {1, 1, 3, 8}})
      .Values(2, kPriors)
      .Values(3, kGroundTruth)
      .NoGradient(2)
      .NoGradient(3)
      .Tolerance(1e-4)
      .Name(name);
}

}  // namespace

// Random loc (offsets) and conf (scores) in [-1, 1]; priors and ground truth fixed, so matching
// does not depend on the inputs. Mining ranks random losses (no ties).
CREMA_LAYER_CONFORMANCE(
    MultiBoxLoss,
    FixedBoxes("multibox_loss_param { num_classes: 3 neg_pos_ratio: 1 }", 24, "max_negative"),
    FixedBoxes("multibox_loss_param { num_classes: 3 loc_loss_type: L2 conf_loss_type: LOGISTIC "
               "mining_type: NONE code_type: CENTER_SIZE loc_weight: 2 } "
               "loss_param { normalization: FULL }",
               24, "l2_logistic_none"),
    FixedBoxes("multibox_loss_param { num_classes: 3 share_location: false match_type: BIPARTITE "
               "mining_type: NONE code_type: CORNER_SIZE }",
               72, "per_class_bipartite"),
    FixedBoxes("multibox_loss_param { num_classes: 3 mining_type: HARD_EXAMPLE sample_size: 4 "
               "nms_param { nms_threshold: 0.5 } use_prior_for_nms: true } "
               "loss_param { normalization: BATCH_SIZE }",
               24, "hard_example_nms"));

namespace crema::testing {
namespace {

struct LossRun {
  std::unique_ptr<Layer> layer;
  std::unique_ptr<Blob> loc, conf, prior, gt;
  std::unique_ptr<Blob> top;
  double loss = 0;
  std::vector<double> loc_diff, conf_diff;
  MultiBoxLossLayer* multibox() { return static_cast<MultiBoxLossLayer*>(layer.get()); }
  BlobVec bottom() const { return {loc.get(), conf.get(), prior.get(), gt.get()}; }
};

// MultiBoxLoss with `param` (inside multibox_loss_param, plus `extra` in the layer) on the given
// bottoms, set up; with `run`, Forward, then Backward with top diff 1 (the loss weight) into loc
// and conf.
LossRun RunLoss(const std::string& param, const std::vector<int>& loc_shape,
                const std::vector<double>& loc, const std::vector<int>& conf_shape,
                const std::vector<double>& conf, const std::vector<double>& priors,
                const std::vector<double>& gt, const std::string& extra = "",
                DataType dtype = DataType::kFloat64, bool run = true) {
  LossRun r;
  r.layer = CreateLayer(
      "name: 'mbox' type: 'MultiBoxLoss' multibox_loss_param { " + param + " } " + extra, dtype);
  r.loc = MakeBlob(loc_shape, loc, dtype);
  r.conf = MakeBlob(conf_shape, conf, dtype);
  r.prior = MakeBlob({1, 2, static_cast<int>(priors.size() / 2)}, priors, dtype);
  r.gt = MakeBlob({1, 1, static_cast<int>(gt.size() / 8), 8}, gt, dtype);
  r.top = std::make_unique<Blob>(dtype);
  const BlobVec bottom = r.bottom();
  r.layer->SetUp(bottom, {r.top.get()});
  EXPECT_EQ(r.top->count(), 1);
  if (!run) return r;
  r.loss = r.layer->Forward(bottom, {r.top.get()});
  r.layer->Backward({r.top.get()}, {true, true, false, false}, bottom);
  r.loc_diff = DiffOf(*r.loc);
  r.conf_diff = DiffOf(*r.conf);
  return r;
}

// The six-prior fixture with loc and conf values in [-1, 1] that follow a fixed pattern.
std::vector<double> Pattern(int n, double phase) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(1.7 * i + phase);
  return v;
}

LossRun RunSix(const std::string& param, const std::string& extra = "",
               const std::vector<double>& gt = kGroundTruth) {
  return RunLoss("num_classes: 3 " + param, {2, 24}, Pattern(48, 0.3), {2, 18}, Pattern(36, 1.1),
                 kPriors, gt, extra);
}

double SmoothL1(double d) { return std::abs(d) < 1 ? 0.5 * d * d : std::abs(d) - 0.5; }
double SmoothL1Grad(double d) { return std::abs(d) < 1 ? d : (d > 0 ? 1 : -1); }

// Two priors, one ground truth box, two classes: p0 (0.1, 0.1, 0.5, 0.5) matches the class-1
// box (0.1, 0.1, 0.5, 0.6) with IoU 0.8; p1 (0.6, 0.6, 0.9, 0.9) does not touch it and is the
// only negative candidate.
const std::vector<double> kTwoPriors = {0.1, 0.1, 0.5, 0.5, 0.6, 0.6, 0.9, 0.9,
                                        0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2};
const std::vector<double> kOneBox = {0, 1, 0, 0.1, 0.1, 0.5, 0.6, 0};
const std::vector<double> kTwoLoc = {0.5, 0.5, -0.3, 0.1, 0.7, -0.2, 0.4, 0.9};
const std::vector<double> kTwoConf = {0.2, 1.0, 0.5, -0.5};

struct HandCase {
  double loc_loss = 0, conf_loss = 0;
  std::vector<double> loc_grad, conf_grad;  // before normalizer and weights
};

// The expected values from SSD's formulas, CENTER_SIZE coding.
HandCase TwoPriorCase() {
  HandCase h;
  // Prior: centre (0.3, 0.3), 0.4 x 0.4; box: centre (0.3, 0.35), 0.4 x 0.5.
  const double target[4] = {0 / 0.4 / 0.1, 0.05 / 0.4 / 0.1, std::log(0.4 / 0.4) / 0.2,
                            std::log(0.5 / 0.4) / 0.2};
  h.loc_grad.assign(8, 0.0);
  for (int k = 0; k < 4; ++k) {
    const double d = kTwoLoc[k] - target[k];
    h.loc_loss += SmoothL1(d);
    h.loc_grad[k] = SmoothL1Grad(d);
  }
  // p0 against class 1, p1 against the background (class 0).
  const double z0 = std::exp(0.2) + std::exp(1.0), z1 = std::exp(0.5) + std::exp(-0.5);
  h.conf_loss = -std::log(std::exp(1.0) / z0) - std::log(std::exp(0.5) / z1);
  h.conf_grad = {std::exp(0.2) / z0, std::exp(1.0) / z0 - 1, std::exp(0.5) / z1 - 1,
                 std::exp(-0.5) / z1};
  return h;
}

void ExpectVectorNear(const std::vector<double>& actual, const std::vector<double>& expected,
                      double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << what << " at " << i;
}

TEST(MultiBoxLossLayer, TwoPriorsByHand) {
  const HandCase h = TwoPriorCase();
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tol = dtype == DataType::kFloat32 ? 2e-5 : 1e-6;
    LossRun r = RunLoss("num_classes: 2 code_type: CENTER_SIZE", {1, 8}, kTwoLoc, {1, 4}, kTwoConf,
                        kTwoPriors, kOneBox, "", dtype);
    EXPECT_EQ(r.multibox()->num_matches(), 1);
    EXPECT_EQ(r.multibox()->num_negatives(), 1);
    // VALID: one match, normalizer 1.
    EXPECT_NEAR(r.loss, h.loc_loss + h.conf_loss, tol);
    ExpectVectorNear(r.loc_diff, h.loc_grad, tol, "loc diff");
    ExpectVectorNear(r.conf_diff, h.conf_grad, tol, "conf diff");
  }
}

// loc_weight scales the loc term and its gradient only; the top diff scales both.
// (The targets are float, as SSD's: 1e-5 for their rounding times the weights.)
TEST(MultiBoxLossLayer, LocWeightAndTopDiff) {
  const HandCase h = TwoPriorCase();
  LossRun r = RunLoss("num_classes: 2 code_type: CENTER_SIZE loc_weight: 2.5", {1, 8}, kTwoLoc,
                      {1, 4}, kTwoConf, kTwoPriors, kOneBox, "loss_weight: 3");
  EXPECT_NEAR(r.loss, 3 * (2.5 * h.loc_loss + h.conf_loss), 1e-5);  // weighted by Forward
  EXPECT_NEAR(DataOf(*r.top)[0], 2.5 * h.loc_loss + h.conf_loss, 1e-5);
  std::vector<double> loc_grad = h.loc_grad, conf_grad = h.conf_grad;
  for (double& g : loc_grad) g *= 3 * 2.5;
  for (double& g : conf_grad) g *= 3;
  ExpectVectorNear(r.loc_diff, loc_grad, 1e-5, "loc diff");
  ExpectVectorNear(r.conf_diff, conf_grad, 1e-5, "conf diff");
}

// L2 and LOGISTIC by hand on the same case.
TEST(MultiBoxLossLayer, L2AndLogisticByHand) {
  const double target[4] = {0, 1.25, 0, std::log(1.25) / 0.2};
  double loc_loss = 0;
  std::vector<double> loc_grad(8, 0.0);
  for (int k = 0; k < 4; ++k) {
    const double d = kTwoLoc[k] - target[k];
    loc_loss += 0.5 * d * d;
    loc_grad[k] = d;
  }
  // Sigmoid cross-entropy against one-hot targets: p0 -> class 1, p1 -> class 0.
  const double targets[4] = {0, 1, 1, 0};
  double conf_loss = 0;
  std::vector<double> conf_grad(4);
  for (int i = 0; i < 4; ++i) {
    const double s = 1 / (1 + std::exp(-kTwoConf[i]));
    conf_loss -= targets[i] * std::log(s) + (1 - targets[i]) * std::log(1 - s);
    conf_grad[i] = s - targets[i];
  }
  LossRun r =
      RunLoss("num_classes: 2 code_type: CENTER_SIZE loc_loss_type: L2 conf_loss_type: LOGISTIC",
              {1, 8}, kTwoLoc, {1, 4}, kTwoConf, kTwoPriors, kOneBox);
  EXPECT_NEAR(r.loss, loc_loss + conf_loss, 1e-6);
  ExpectVectorNear(r.loc_diff, loc_grad, 1e-6, "loc diff");
  ExpectVectorNear(r.conf_diff, conf_grad, 1e-6, "conf diff");
}

// CORNER coding (the default): t = (box - prior) / variance.
TEST(MultiBoxLossLayer, CornerTargets) {
  // Zero conf: only the loc term depends on the coding.
  const std::vector<double> zeros_conf(4, 0.0);
  const double target[4] = {0, 0, 0, 0.1 / 0.2};
  double loc_loss = 0;
  for (int k = 0; k < 4; ++k) loc_loss += SmoothL1(kTwoLoc[k] - target[k]);
  LossRun r = RunLoss("num_classes: 2", {1, 8}, kTwoLoc, {1, 4}, zeros_conf, kTwoPriors, kOneBox);
  EXPECT_NEAR(r.loss, loc_loss + 2 * std::log(2.0), 1e-6);
  // With the variance in the target SSD divides prediction and target by the variance.
  double scaled_loss = 0;
  const double variance[4] = {0.1, 0.1, 0.2, 0.2};
  const double plain_target[4] = {0, 0, 0, 0.1};
  std::vector<double> grad(8, 0.0);
  for (int k = 0; k < 4; ++k) {
    const double d = (kTwoLoc[k] - plain_target[k]) / variance[k];
    scaled_loss += SmoothL1(d);
    grad[k] = SmoothL1Grad(d) / variance[k];
  }
  LossRun v = RunLoss("num_classes: 2 encode_variance_in_target: true", {1, 8}, kTwoLoc, {1, 4},
                      zeros_conf, kTwoPriors, kOneBox);
  EXPECT_NEAR(v.loss, scaled_loss + 2 * std::log(2.0), 1e-6);
  ExpectVectorNear(v.loc_diff, grad, 1e-6, "loc diff");
}

// The normalizer: VALID = matches (5 here: p0, p1; p2, p3, p4), FULL = N * P = 12,
// BATCH_SIZE = N = 2, NONE = 1; legacy normalize false = BATCH_SIZE, true = VALID.
TEST(MultiBoxLossLayer, NormalizationModes) {
  const double none = RunSix("", "loss_param { normalization: NONE }").loss;
  ASSERT_GT(none, 0);
  LossRun valid = RunSix("");
  EXPECT_EQ(valid.multibox()->num_matches(), 5);
  EXPECT_NEAR(valid.loss, none / 5, 1e-9);
  EXPECT_NEAR(RunSix("", "loss_param { normalization: FULL }").loss, none / 12, 1e-9);
  EXPECT_NEAR(RunSix("", "loss_param { normalization: BATCH_SIZE }").loss, none / 2, 1e-9);
  EXPECT_NEAR(RunSix("", "loss_param { normalize: false }").loss, none / 2, 1e-9);
  EXPECT_NEAR(RunSix("", "loss_param { normalize: true }").loss, none / 5, 1e-9);
  // The gradient is normalized alike.
  LossRun none_run = RunSix("", "loss_param { normalization: NONE }");
  for (size_t i = 0; i < valid.conf_diff.size(); ++i)
    EXPECT_NEAR(valid.conf_diff[i], none_run.conf_diff[i] / 5, 1e-9);
  // No match at all: the normalizer is at least 1.
  const std::vector<double> far_box = {0, 1, 0, 0.95, 0.95, 0.99, 0.99, 0};
  LossRun nothing = RunSix("mining_type: NONE", "", far_box);
  EXPECT_EQ(nothing.multibox()->num_matches(), 0);
  EXPECT_NEAR(nothing.loss,
              RunSix("mining_type: NONE", "loss_param { normalization: NONE }", far_box).loss,
              1e-12);
}

// BIPARTITE keeps one prior per box (p0, p2, p4); PER_PREDICTION adds every prior at or above
// overlap_threshold (p1 0.818, p3 0.860).
TEST(MultiBoxLossLayer, BipartiteVersusPerPrediction) {
  EXPECT_EQ(RunSix("match_type: BIPARTITE").multibox()->num_matches(), 3);
  EXPECT_EQ(RunSix("match_type: PER_PREDICTION").multibox()->num_matches(), 5);
  EXPECT_EQ(RunSix("overlap_threshold: 0.85").multibox()->num_matches(), 4);  // p1 drops
  EXPECT_EQ(RunSix("overlap_threshold: 0.95").multibox()->num_matches(), 3);
  // Only the positives get a loc gradient.
  LossRun r = RunSix("match_type: BIPARTITE");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) {
      const bool positive = (i == 0 && j == 0) || (i == 1 && (j == 2 || j == 4));
      double norm = 0;
      for (int k = 0; k < 4; ++k) norm += std::abs(r.loc_diff[(i * 6 + j) * 4 + k]);
      EXPECT_EQ(norm > 0, positive) << "image " << i << " prior " << j;
    }
}

// Which priors got a conf gradient, per image.
std::vector<std::vector<int>> ConfSelected(const LossRun& r, int num, int priors, int classes) {
  std::vector<std::vector<int>> selected(num);
  for (int i = 0; i < num; ++i)
    for (int j = 0; j < priors; ++j) {
      double norm = 0;
      for (int c = 0; c < classes; ++c)
        norm += std::abs(r.conf_diff[(i * priors + j) * classes + c]);
      if (norm > 0) selected[i].push_back(j);
    }
  return selected;
}

// MAX_NEGATIVE: floor(num_pos * neg_pos_ratio) unmatched priors below neg_overlap with the
// largest background loss.
TEST(MultiBoxLossLayer, MaxNegativeMiningCount) {
  // Background scores: the lower, the larger the background loss. Image 0's candidates rank
  // p3 > p4 > p2 > p5; image 1's p1 > p0 > p5.
  std::vector<double> conf(36, 0.0);
  const double background[2][6] = {{0, 0, -1, -3, -2, -0.5}, {-1, -2, 0, 0, 0, -0.5}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j) conf[(i * 6 + j) * 3] = background[i][j];
  const auto run = [&](const std::string& param) {
    return RunLoss("num_classes: 3 " + param, {2, 24}, std::vector<double>(48, 0.0), {2, 18}, conf,
                   kPriors, kGroundTruth);
  };
  // Ratio 0.5: image 0 (2 positives) takes 1 negative, image 1 (3 positives) 1.
  LossRun half = run("neg_pos_ratio: 0.5");
  EXPECT_EQ(half.multibox()->num_negatives(), 2);
  EXPECT_EQ(ConfSelected(half, 2, 6, 3), (std::vector<std::vector<int>>{{0, 1, 3}, {1, 2, 3, 4}}));
  // Ratio 1: 2 and 3 (all of image 1's candidates).
  LossRun one = run("neg_pos_ratio: 1");
  EXPECT_EQ(one.multibox()->num_negatives(), 5);
  EXPECT_EQ(ConfSelected(one, 2, 6, 3),
            (std::vector<std::vector<int>>{{0, 1, 3, 4}, {0, 1, 2, 3, 4, 5}}));
  // Ratio 3 (default): capped by the candidates, 4 + 3.
  EXPECT_EQ(run("").multibox()->num_negatives(), 7);
  // neg_overlap 0: no prior has an overlap below it, so no negatives.
  EXPECT_EQ(run("neg_overlap: 0").multibox()->num_negatives(), 0);
  // Legacy do_neg_mining false = NONE: every prior counts.
  EXPECT_EQ(ConfSelected(run("do_neg_mining: false"), 2, 6, 3),
            (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}));
}

// HARD_EXAMPLE: per image the sample_size priors with the largest loc + conf loss; matched ones
// left out stop being positives.
TEST(MultiBoxLossLayer, HardExampleSampleSize) {
  LossRun r = RunSix("mining_type: HARD_EXAMPLE sample_size: 1");
  EXPECT_EQ(r.multibox()->num_matches() + r.multibox()->num_negatives(), 2);
  const auto selected = ConfSelected(r, 2, 6, 3);
  ASSERT_EQ(selected[0].size(), 1u);
  ASSERT_EQ(selected[1].size(), 1u);
  // sample_size at least the prior count keeps every match and takes every other prior.
  LossRun all = RunSix("mining_type: HARD_EXAMPLE sample_size: 6");
  EXPECT_EQ(all.multibox()->num_matches(), 5);
  EXPECT_EQ(all.multibox()->num_negatives(), 7);
  // NMS over the priors (threshold 0.5): p0/p1 and p2/p3 overlap, so at most 4 per image.
  LossRun nms = RunSix(
      "mining_type: HARD_EXAMPLE sample_size: 6 nms_param { nms_threshold: 0.5 } "
      "use_prior_for_nms: true");
  EXPECT_EQ(nms.multibox()->num_matches() + nms.multibox()->num_negatives(), 8);
}

// use_difficult_gt false drops image 1's difficult box (p4's match).
TEST(MultiBoxLossLayer, DifficultGroundTruth) {
  EXPECT_EQ(RunSix("").multibox()->num_matches(), 5);
  EXPECT_EQ(RunSix("use_difficult_gt: false").multibox()->num_matches(), 4);
}

// Rows with item_id -1 are placeholders; an image without boxes has no positives, no mined
// negatives, and (mining NONE) all priors as background.
TEST(MultiBoxLossLayer, ImageWithoutGroundTruth) {
  const std::vector<double> gt = {0,  1,  0,  0.12, 0.1, 0.42, 0.4, 0,  //
                                  -1, -1, -1, -1,   -1,  -1,   -1,  -1};
  LossRun mined = RunSix("", "", gt);
  EXPECT_EQ(mined.multibox()->num_matches(), 2);
  EXPECT_TRUE(ConfSelected(mined, 2, 6, 3)[1].empty());
  LossRun none = RunSix("mining_type: NONE", "", gt);
  EXPECT_EQ(ConfSelected(none, 2, 6, 3)[1].size(), 6u);
}

// share_location false: the loc gradient lands in the matched box's class slot.
TEST(MultiBoxLossLayer, PerClassLocations) {
  LossRun r = RunLoss("num_classes: 3 share_location: false mining_type: NONE", {2, 72},
                      Pattern(144, 0.3), {2, 18}, Pattern(36, 1.1), kPriors, kGroundTruth);
  EXPECT_EQ(r.multibox()->num_matches(), 5);
  // Matches: (image, prior, class).
  const int expected[5][3] = {{0, 0, 1}, {0, 1, 1}, {1, 2, 2}, {1, 3, 2}, {1, 4, 1}};
  std::vector<double> mask(r.loc_diff.size(), 0.0);
  for (const auto& m : expected)
    for (int k = 0; k < 4; ++k) mask[((m[0] * 6 + m[1]) * 3 + m[2]) * 4 + k] = 1;
  for (size_t i = 0; i < mask.size(); ++i) EXPECT_EQ(r.loc_diff[i] != 0, mask[i] == 1) << i;
}

// Matching with the decoded predictions: zero offsets decode to the priors (same matches);
// pushing p1's prediction away unmatches it.
TEST(MultiBoxLossLayer, MatchWithPredictions) {
  const std::vector<double> zeros(48, 0.0);
  const auto run = [&](const std::vector<double>& loc) {
    return RunLoss("num_classes: 3 use_prior_for_matching: false", {2, 24}, loc, {2, 18},
                   Pattern(36, 1.1), kPriors, kGroundTruth);
  };
  EXPECT_EQ(run(zeros).multibox()->num_matches(), 5);
  std::vector<double> moved = zeros;
  for (int k = 0; k < 4; ++k) moved[4 + k] = 4;  // image 0, p1: +0.4 / +0.8 on every corner
  EXPECT_EQ(run(moved).multibox()->num_matches(), 4);
}

// map_object_to_agnostic: every box is class 1 of 2.
TEST(MultiBoxLossLayer, ObjectAgnostic) {
  LossRun r = RunLoss("num_classes: 2 map_object_to_agnostic: true", {2, 24}, Pattern(48, 0.3),
                      {2, 12}, Pattern(24, 1.1), kPriors, kGroundTruth);
  EXPECT_EQ(r.multibox()->num_matches(), 5);
  EXPECT_GT(r.loss, 0);
}

// bp_inside: a coordinate of the prior outside [0, 1] gets no loss or gradient.
TEST(MultiBoxLossLayer, BpInside) {
  const std::vector<double> priors = {-0.1, 0.1, 0.5, 0.5, 0.6, 0.6, 0.9, 0.9,
                                      0.1,  0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2};
  const std::vector<double> box = {0, 1, 0, 0, 0.1, 0.5, 0.5, 0};
  LossRun plain = RunLoss("num_classes: 2", {1, 8}, kTwoLoc, {1, 4}, kTwoConf, priors, box);
  LossRun inside =
      RunLoss("num_classes: 2 bp_inside: true", {1, 8}, kTwoLoc, {1, 4}, kTwoConf, priors, box);
  EXPECT_NE(plain.loc_diff[0], 0);
  EXPECT_EQ(inside.loc_diff[0], 0);
  for (int k = 1; k < 4; ++k) EXPECT_EQ(inside.loc_diff[k], plain.loc_diff[k]) << k;
  EXPECT_NEAR(plain.loss - inside.loss, SmoothL1(kTwoLoc[0] - 1.0), 1e-6);  // t0 = 0.1 / 0.1
}

// The gradient of a hand-sized case with the shared checker, for each conf loss.
TEST(MultiBoxLossLayer, GradientTwoPriors) {
  for (const char* extra : {"", "conf_loss_type: LOGISTIC loc_loss_type: L2"}) {
    SCOPED_TRACE(extra);
    LossRun r =
        RunLoss(std::string("num_classes: 2 code_type: CENTER_SIZE ") + extra, {1, 8}, kTwoLoc,
                {1, 4}, kTwoConf, kTwoPriors, kOneBox, "", DataType::kFloat64, false);
    GradientCheckOptions options;
    options.no_gradient_bottoms = {2, 3};
    CheckGradient(r.layer.get(), r.bottom(), {r.top.get()}, options);
  }
}

// ---- errors ----

const std::vector<std::vector<int>> kShapes = {{2, 24}, {2, 18}, {1, 2, 24}, {1, 1, 3, 8}};

TEST(MultiBoxLossLayer, ParameterErrors) {
  ExpectSetUpError("type: 'MultiBoxLoss'", kShapes, "multibox_loss_param.num_classes");
  ExpectSetUpError("type: 'MultiBoxLoss' multibox_loss_param { num_classes: 0 }", kShapes,
                   "multibox_loss_param.num_classes");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 "
      "background_label_id: 3 }",
      kShapes, "multibox_loss_param.background_label_id");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 "
      "map_object_to_agnostic: true }",
      kShapes, "multibox_loss_param.num_classes");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 "
      "share_location: false }",
      {{2, 72}, {2, 18}, {1, 2, 24}, {1, 1, 3, 8}}, "multibox_loss_param.share_location");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 "
      "do_neg_mining: false mining_type: HARD_EXAMPLE }",
      kShapes, "multibox_loss_param.do_neg_mining");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 "
      "mining_type: HARD_EXAMPLE sample_size: 0 }",
      kShapes, "multibox_loss_param.sample_size");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 } "
      "propagate_down: true propagate_down: true propagate_down: true "
      "propagate_down: false",
      kShapes, "propagate_down[2]");
  ExpectSetUpError(
      "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 } "
      "propagate_down: true propagate_down: true propagate_down: false "
      "propagate_down: true",
      kShapes, "propagate_down[3]");
}

TEST(MultiBoxLossLayer, ShapeErrors) {
  const std::string text = "type: 'MultiBoxLoss' multibox_loss_param { num_classes: 3 }";
  // Location and confidence counts must fit the priors; the batch must agree.
  ExpectSetUpError(text, {{2, 20}, {2, 18}, {1, 2, 24}, {1, 1, 3, 8}}, "location predictions");
  ExpectSetUpError(text, {{2, 24}, {2, 12}, {1, 2, 24}, {1, 1, 3, 8}}, "confidence predictions");
  ExpectSetUpError(text, {{2, 24}, {1, 18}, {1, 2, 24}, {1, 1, 3, 8}}, "first dimension");
  ExpectSetUpError(text, {{2, 24}, {2, 18}, {1, 24}, {1, 1, 3, 8}}, "prior bottom");
  ExpectSetUpError(text, {{2, 24}, {2, 18}, {1, 2, 24}, {1, 1, 3, 7}}, "ground truth bottom");
}

void ExpectRuntimeError(const std::vector<double>& gt, const std::string& needle) {
  try {
    RunSix("", "", gt);
    ADD_FAILURE() << "expected a RuntimeError containing " << needle;
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mbox"), std::string::npos) << e.what();
  }
}

TEST(MultiBoxLossLayer, GroundTruthErrors) {
  ExpectRuntimeError({0, 3, 0, 0.1, 0.1, 0.4, 0.4, 0}, "label 3 is outside [0, 3)");
  ExpectRuntimeError({0, 0, 0, 0.1, 0.1, 0.4, 0.4, 0}, "background label");
  ExpectRuntimeError({2, 1, 0, 0.1, 0.1, 0.4, 0.4, 0}, "item_id 2");
}

TEST(MultiBoxLossLayer, NoGradientToPriorsOrLabels) {
  LossRun r = RunLoss("num_classes: 2", {1, 8}, kTwoLoc, {1, 4}, kTwoConf, kTwoPriors, kOneBox, "",
                      DataType::kFloat64, false);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(r.layer->AllowForceBackward(b), b < 2) << b;
  r.layer->Forward(r.bottom(), {r.top.get()});
  EXPECT_THROW(r.layer->Backward({r.top.get()}, {true, true, true, false}, r.bottom()),
               ConfigError);
  EXPECT_THROW(r.layer->Backward({r.top.get()}, {true, true, false, true}, r.bottom()),
               ConfigError);
}

// As SSD, `propagate_down: false` on loc leaves the loc term out of the loss.
TEST(MultiBoxLossLayer, PropagateDownFalseDropsTheTerm) {
  const HandCase h = TwoPriorCase();
  LossRun r = RunLoss("num_classes: 2 code_type: CENTER_SIZE", {1, 8}, kTwoLoc, {1, 4}, kTwoConf,
                      kTwoPriors, kOneBox,
                      "propagate_down: false propagate_down: true propagate_down: false "
                      "propagate_down: false");
  EXPECT_NEAR(r.loss, h.conf_loss, 1e-6);
}

}  // namespace
}  // namespace crema::testing
