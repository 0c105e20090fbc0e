// io/boxes: the detection box library. Overlaps of boxes whose areas are known by construction,
// the three prior codings as inverses of each other, NMS and its eta, SSD's two-stage matching,
// and the three average precisions against hand-ranked detections.
#include "io/boxes.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"

namespace crema::boxes {
namespace {

TEST(Boxes, AreaIntersectionAndJaccard) {
  const Box a{0, 0, 0.5f, 0.5f};
  const Box b{0.25f, 0.25f, 0.75f, 0.75f};
  EXPECT_FLOAT_EQ(Area(a), 0.25f);
  EXPECT_FLOAT_EQ(Area(Box{0.5f, 0, 0.25f, 1}), 0);  // inverted
  const Box common = Intersect(a, b);
  EXPECT_FLOAT_EQ(common.xmin, 0.25f);
  EXPECT_FLOAT_EQ(common.xmax, 0.5f);
  // 1/16 in common, 1/4 + 1/4 - 1/16 = 7/16 in the union.
  EXPECT_FLOAT_EQ(Jaccard(a, b), 1.f / 7);
  EXPECT_FLOAT_EQ(Jaccard(a, a), 1);
  EXPECT_FLOAT_EQ(Jaccard(a, Box{0.6f, 0.6f, 0.9f, 0.9f}), 0);
  EXPECT_FLOAT_EQ(Jaccard(a, Box{0.5f, 0, 1, 0.5f}), 0);  // touching edges
  EXPECT_FLOAT_EQ(Area(Intersect(a, Box{0.6f, 0.6f, 0.9f, 0.9f})), 0);
}

TEST(Boxes, ClipAndBoundary) {
  const Box b{-0.1f, 0.2f, 1.3f, 0.9f};
  EXPECT_TRUE(CrossesBoundary(b));
  const Box clipped = Clip(b);
  EXPECT_FLOAT_EQ(clipped.xmin, 0);
  EXPECT_FLOAT_EQ(clipped.xmax, 1);
  EXPECT_FLOAT_EQ(clipped.ymin, 0.2f);
  EXPECT_FALSE(CrossesBoundary(clipped));
  NormalizedBBox proto;
  ToProto(clipped, &proto);
  const Box back = FromProto(proto);
  EXPECT_FLOAT_EQ(back.ymax, 0.9f);
}

TEST(Boxes, CodingsAreInversesAndMatchTheirFormulas) {
  const Box prior{0.2f, 0.3f, 0.6f, 0.5f};  // width 0.4, height 0.2, centre (0.4, 0.4)
  const Box truth{0.25f, 0.2f, 0.75f, 0.6f};
  const float variance[4] = {0.1f, 0.1f, 0.2f, 0.2f};
  for (CodeType code : {PriorBoxParameter::CORNER, PriorBoxParameter::CENTER_SIZE,
                        PriorBoxParameter::CORNER_SIZE}) {
    for (bool in_target : {false, true}) {
      float t[4];
      Encode(prior, variance, code, in_target, truth, t);
      const Box decoded = Decode(prior, variance, code, in_target, t);
      EXPECT_NEAR(decoded.xmin, truth.xmin, 1e-6) << code << in_target;
      EXPECT_NEAR(decoded.ymin, truth.ymin, 1e-6) << code << in_target;
      EXPECT_NEAR(decoded.xmax, truth.xmax, 1e-6) << code << in_target;
      EXPECT_NEAR(decoded.ymax, truth.ymax, 1e-6) << code << in_target;
    }
  }
  float t[4];
  Encode(prior, variance, PriorBoxParameter::CENTER_SIZE, false, truth, t);
  // Centre (0.5, 0.4): offsets 0.1 / 0.4 / 0.1 and 0 / 0.2 / 0.1; sizes log(0.5/0.4) / 0.2 and
  // log(0.4/0.2) / 0.2.
  EXPECT_NEAR(t[0], 2.5, 1e-5);
  EXPECT_NEAR(t[1], 0, 1e-5);
  EXPECT_NEAR(t[2], std::log(1.25) / 0.2, 1e-5);
  EXPECT_NEAR(t[3], std::log(2.0) / 0.2, 1e-5);
  Encode(prior, variance, PriorBoxParameter::CORNER, false, truth, t);
  EXPECT_NEAR(t[0], 0.05 / 0.1, 1e-5);
  EXPECT_NEAR(t[3], 0.1 / 0.2, 1e-5);
  // Sized codings need a prior with area.
  EXPECT_THROW(Encode(Box{0.2f, 0.2f, 0.2f, 0.4f}, variance, PriorBoxParameter::CENTER_SIZE, false,
                      truth, t),
               RuntimeError);
}

TEST(Boxes, NmsKeepsTheBestOfEachCluster) {
  const std::vector<Box> boxes = {{0, 0, 0.4f, 0.4f},
                                  {0.02f, 0, 0.42f, 0.4f},  // overlaps box 0 by ~0.9
                                  {0.5f, 0.5f, 0.9f, 0.9f},
                                  {0.1f, 0, 0.5f, 0.4f}};  // overlaps box 0 by 0.6
  const std::vector<float> scores = {0.8f, 0.9f, 0.7f, 0.05f};
  EXPECT_EQ(Nms(boxes, scores, 0.1f, 0.5f), (std::vector<int>{1, 2}));
  EXPECT_EQ(Nms(boxes, scores, 0, 0.5f), (std::vector<int>{1, 2}));
  EXPECT_EQ(Nms(boxes, scores, 0, 0.95f), (std::vector<int>{1, 0, 2, 3}));
  EXPECT_EQ(Nms(boxes, scores, 0, 0.95f, 1, 2), (std::vector<int>{1, 0}));
  // eta 0.6: the threshold drops to 0.57 after the first kept box (box 0 at 0.9 goes) and to 0.342
  // after the second (box 3 at 0.67 goes).
  EXPECT_EQ(Nms(boxes, scores, 0, 0.95f, 0.6f), (std::vector<int>{1, 2}));
}

TEST(Boxes, MatchIsBipartiteThenPerPrediction) {
  const std::vector<Box> truth = {{0, 0, 0.5f, 0.5f}, {0.5f, 0.5f, 1, 1}};
  const std::vector<Box> priors = {{0, 0, 0.5f, 0.5f},            // truth 0 exactly
                                   {0, 0, 0.5f, 0.4f},            // truth 0 at 0.8
                                   {0.6f, 0.6f, 1, 1},            // truth 1 at 0.64
                                   {0.25f, 0.25f, 0.75f, 0.75f},  // each at 1/7
                                   {0.9f, 0, 1, 0.1f}};           // nothing
  const Matches bipartite = Match(truth, priors, false, 0.5f);
  EXPECT_EQ(bipartite.indices, (std::vector<int>{0, -1, 1, -1, -1}));
  EXPECT_FLOAT_EQ(bipartite.overlaps[1], 0.8f);  // the best overlap, matched or not
  EXPECT_NEAR(bipartite.overlaps[3], 1.f / 7, 1e-6);
  EXPECT_FLOAT_EQ(bipartite.overlaps[4], 0);
  const Matches both = Match(truth, priors, true, 0.5f);
  EXPECT_EQ(both.indices, (std::vector<int>{0, 0, 1, -1, -1}));
  EXPECT_EQ(Match(truth, priors, true, 0.1f).indices, (std::vector<int>{0, 0, 1, 0, -1}));
  // Bipartite gives every truth box a prediction even below the threshold.
  const Matches weak = Match({{0.2f, 0.2f, 0.8f, 0.8f}}, {{0.7f, 0.7f, 0.9f, 0.9f}}, true, 0.5f);
  EXPECT_EQ(weak.indices, (std::vector<int>{0}));
  // Predictions crossing the image boundary take no part when asked.
  EXPECT_EQ(Match(truth, {{-0.1f, 0, 0.5f, 0.5f}}, true, 0.5f, true).indices,
            (std::vector<int>{-1}));
  EXPECT_EQ(Match({}, priors, true, 0.5f).indices, (std::vector<int>(5, -1)));
}

TEST(Boxes, AveragePrecisionOfARanking) {
  // Ranked: TP, FP, TP, FP, TP against 4 positives (one never found).
  // precision 1, 1/2, 2/3, 2/4, 3/5; recall 1/4, 1/4, 2/4, 2/4, 3/4.
  const std::vector<std::pair<float, int>> ranked = {
      {0.6f, 1}, {0.9f, 1}, {0.3f, 0}, {0.7f, 0}, {0.2f, 1}};  // given out of order
  // Integral: each recall step times the precision where it happened.
  EXPECT_NEAR(AveragePrecision(ranked, 4, "Integral"), 0.25 * 1 + 0.25 * 2 / 3. + 0.25 * 0.6, 1e-6);
  // MaxIntegral: the same steps with the best precision at that recall or beyond.
  EXPECT_NEAR(AveragePrecision(ranked, 4, "MaxIntegral"), 0.25 * 1 + 0.25 * 2 / 3. + 0.25 * 0.6,
              1e-6);
  // 11point: recall >= 0, .1, .2 -> 1; .3, .4, .5 -> 2/3; .6, .7 -> 0.6; .8, .9, 1 -> 0.
  EXPECT_NEAR(AveragePrecision(ranked, 4, "11point"), (3 * 1 + 3 * 2 / 3. + 2 * 0.6) / 11, 1e-6);
  // A ranking where precision rises again: MaxIntegral lifts the earlier step.
  const std::vector<std::pair<float, int>> dip = {{0.9f, 1}, {0.8f, 0}, {0.7f, 1}, {0.6f, 1}};
  // precision 1, 1/2, 2/3, 3/4; recall 1/3, 1/3, 2/3, 1.
  EXPECT_NEAR(AveragePrecision(dip, 3, "Integral"), (1 + 2 / 3. + 0.75) / 3, 1e-6);
  EXPECT_NEAR(AveragePrecision(dip, 3, "MaxIntegral"), (1 + 0.75 + 0.75) / 3, 1e-6);
  EXPECT_EQ(AveragePrecision({}, 3, "Integral"), 0);
  EXPECT_EQ(AveragePrecision(dip, 0, "Integral"), 0);
  EXPECT_THROW(AveragePrecision(dip, 3, "VOC"), ConfigError);
  EXPECT_NO_THROW(CheckApVersion("11point", "ap_version"));
  try {
    CheckApVersion("11-point", "solver.ap_version");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("solver.ap_version"), std::string::npos);
  }
}

}  // namespace
}  // namespace crema::boxes
