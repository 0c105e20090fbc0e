#include "layers/detection_output/detection_output_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

// One image and keep_top_k 1 keep exactly one box, so the top keeps its set-up shape (1, 1, 1, 7)
// as the harness requires; random boxes (CORNER decoding: priors need no area), variances and
// scores in [0, 1] (6 priors, 3 classes).
CREMA_LAYER_CONFORMANCE(
    DetectionOutput,
    LayerCase("detection_output_param { num_classes: 3 keep_top_k: 1 confidence_threshold: 0.01 "
              "nms_param { nms_threshold: 0.45 top_k: 4 } }",
              {{1, 24}, {1, 18}, {1, 2, 24}})
        .Range(0, 1)
        .NoGradient(0)
        .NoGradient(1)
        .NoGradient(2)
        .NoGradientCheck()
        .Name("shared_corner"),
    LayerCase("detection_output_param { num_classes: 3 share_location: false keep_top_k: 1 "
              "background_label_id: -1 code_type: CORNER variance_encoded_in_target: true }",
              {{1, 72}, {1, 18}, {1, 2, 24}})
        .Range(0, 1)
        .NoGradient(0)
        .NoGradient(1)
        .NoGradient(2)
        .NoGradientCheck()
        .Name("per_class_corner"));

namespace crema::testing {
namespace {

using Rows = std::vector<std::vector<double>>;

// Three priors with variances (0.1, 0.1, 0.2, 0.2): p0 and p1 overlap (IoU 0.036 / 0.044 =
// 0.818), p2 is apart.
const std::vector<double> kPriors = {
    0.1, 0.1, 0.3, 0.3, 0.12, 0.1, 0.32, 0.3, 0.5, 0.5, 0.9, 0.7,   // boxes
    0.1, 0.1, 0.2, 0.2, 0.1,  0.1, 0.2,  0.2, 0.1, 0.1, 0.2, 0.2};  // variances
// CENTER_SIZE offsets: p0 and p1 decode to themselves; p2 (centre (0.7, 0.6), 0.4 x 0.2) moves
// its centre by (0.1 * 0.5 * 0.4, 0.1 * -1 * 0.2) and doubles its height (e^(0.2 * 5 ln 2) = 2):
// (0.52, 0.38, 0.92, 0.78).
const std::vector<double> kLoc = {0, 0, 0, 0, 0, 0, 0, 0, 0.5, -1, 0, 5 * std::log(2.0)};
const std::vector<double> kP0 = {0.1, 0.1, 0.3, 0.3};
const std::vector<double> kP2 = {0.52, 0.38, 0.92, 0.78};
// Per prior: background, class 1, class 2 (the background's 0.3 is above the threshold).
const std::vector<double> kConf = {0.1, 0.8, 0.1, 0.2, 0.7, 0.1, 0.3, 0.2, 0.5};

std::vector<double> Row(double image, double label, double score, const std::vector<double>& box) {
  return {image, label, score, box[0], box[1], box[2], box[3]};
}

// Runs DetectionOutput with `param` (inside detection_output_param) and returns the top rows.
Rows RunDetection(const std::string& param, const std::vector<int>& loc_shape,
                  const std::vector<double>& loc, const std::vector<int>& conf_shape,
                  const std::vector<double>& conf, const std::vector<double>& priors,
                  DataType dtype, std::vector<int>* shape = nullptr) {
  auto layer =
      CreateLayer("type: 'DetectionOutput' detection_output_param { " + param + " }", dtype);
  auto loc_blob = MakeBlob(loc_shape, loc, dtype);
  auto conf_blob = MakeBlob(conf_shape, conf, dtype);
  auto prior_blob = MakeBlob({1, 2, static_cast<int>(priors.size() / 2)}, priors, dtype);
  Blob top(dtype);
  const BlobVec bottom = {loc_blob.get(), conf_blob.get(), prior_blob.get()};
  layer->SetUp(bottom, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{1, 1, 1, 7}));
  layer->Forward(bottom, {&top});
  if (shape) *shape = top.shape();
  EXPECT_EQ(top.num_axes(), 4);
  EXPECT_EQ(top.shape(3), 7);
  const std::vector<double> data = DataOf(top);
  Rows rows;
  for (size_t i = 0; i < data.size(); i += 7)
    rows.emplace_back(data.begin() + i, data.begin() + i + 7);
  return rows;
}

Rows RunThreePriors(const std::string& extra, DataType dtype = DataType::kFloat64) {
  return RunDetection("num_classes: 3 code_type: CENTER_SIZE confidence_threshold: 0.15 " + extra,
                      {1, 12}, kLoc, {1, 9}, kConf, kPriors, dtype);
}

void ExpectRows(const Rows& actual, const Rows& expected, double tolerance = 1e-6) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t r = 0; r < actual.size(); ++r)
    for (size_t k = 0; k < 7; ++k)
      EXPECT_NEAR(actual[r][k], expected[r][k], tolerance) << "row " << r << " column " << k;
}

// Class 1: p0 (0.8) kept, p1 (0.7) suppressed by p0, p2 (0.2) kept; class 2: only p2 (0.5)
// passes the threshold. The background is skipped; rows go by label, then score.
TEST(DetectionOutputLayer, NmsSuppressesTheOverlap) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.45 }", dtype),
               {Row(0, 1, 0.8, kP0), Row(0, 1, 0.2, kP2), Row(0, 2, 0.5, kP2)});
  }
}

// keep_top_k 2 ranks the three detections across classes (0.8, 0.5, 0.2) and keeps two.
TEST(DetectionOutputLayer, KeepTopKAcrossClasses) {
  ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.45 } keep_top_k: 2"),
             {Row(0, 1, 0.8, kP0), Row(0, 2, 0.5, kP2)});
  // keep_top_k at least the detection count changes nothing.
  ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.45 } keep_top_k: 3"),
             {Row(0, 1, 0.8, kP0), Row(0, 1, 0.2, kP2), Row(0, 2, 0.5, kP2)});
}

// top_k 1 keeps only the best candidate of each class before NMS.
TEST(DetectionOutputLayer, NmsTopK) {
  ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.45 top_k: 1 }"),
             {Row(0, 1, 0.8, kP0), Row(0, 2, 0.5, kP2)});
}

// Threshold 0.9 lets p1 (IoU 0.818) through; with eta 0.5 the threshold drops to 0.45 once p0
// is kept, and p1 is suppressed.
TEST(DetectionOutputLayer, AdaptiveEta) {
  const std::vector<double> p1 = {0.12, 0.1, 0.32, 0.3};
  ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.9 }"),
             {Row(0, 1, 0.8, kP0), Row(0, 1, 0.7, p1), Row(0, 1, 0.2, kP2), Row(0, 2, 0.5, kP2)});
  ExpectRows(RunThreePriors("nms_param { nms_threshold: 0.9 eta: 0.5 }"),
             {Row(0, 1, 0.8, kP0), Row(0, 1, 0.2, kP2), Row(0, 2, 0.5, kP2)});
}

// Without confidence_threshold every score counts (SSD's -FLT_MAX); background_label_id -1
// makes class 0 a detection class too.
TEST(DetectionOutputLayer, NoThresholdNoBackground) {
  const Rows rows = RunDetection(
      "num_classes: 3 code_type: CENTER_SIZE background_label_id: -1 "
      "share_location: false nms_param { nms_threshold: 0.45 }",
      {1, 36}, std::vector<double>(36, 0.0), {1, 9}, kConf, kPriors, DataType::kFloat64);
  // Zero offsets: every class's boxes are the priors. Class 0 by score: p2 0.3, p1 0.2, p0 0.1
  // (suppressed by p1). Class 2: p2 0.5, then the tie p0 0.1 before p1 0.1 (suppressed by p0).
  const std::vector<double> p1 = {0.12, 0.1, 0.32, 0.3}, p2 = {0.5, 0.5, 0.9, 0.7};
  ExpectRows(rows, {Row(0, 0, 0.3, p2), Row(0, 0, 0.2, p1), Row(0, 1, 0.8, kP0), Row(0, 1, 0.2, p2),
                    Row(0, 2, 0.5, p2), Row(0, 2, 0.1, kP0)});
}

// Equal scores keep the order of their priors within a class and of their labels across
// classes (SSD's std::sort leaves ties unspecified; crema sorts stably).
TEST(DetectionOutputLayer, TiesKeepPriorAndLabelOrder) {
  const std::vector<double> conf = {0, 0.5, 0, 0, 0, 0, 0, 0.5, 0.5};
  const std::vector<double> p2 = {0.5, 0.5, 0.9, 0.7};
  const std::string base =
      "num_classes: 3 confidence_threshold: 0.1 nms_param { nms_threshold: "
      "0.45 } ";
  const std::vector<double> zeros(12, 0.0);
  ExpectRows(RunDetection(base, {1, 12}, zeros, {1, 9}, conf, kPriors, DataType::kFloat64),
             {Row(0, 1, 0.5, kP0), Row(0, 1, 0.5, p2), Row(0, 2, 0.5, p2)});
  ExpectRows(RunDetection(base + "keep_top_k: 2", {1, 12}, zeros, {1, 9}, conf, kPriors,
                          DataType::kFloat64),
             {Row(0, 1, 0.5, kP0), Row(0, 1, 0.5, p2)});
}

// Two images: the second keeps nothing, and only the first one's rows appear.
TEST(DetectionOutputLayer, BatchRowsCarryTheImageId) {
  std::vector<double> loc = kLoc, conf = kConf;
  loc.insert(loc.end(), kLoc.begin(), kLoc.end());
  const std::vector<double> low = {0.9, 0.05, 0.05, 0.9, 0.05, 0.05, 0.9, 0.05, 0.05};
  conf.insert(conf.end(), low.begin(), low.end());
  ExpectRows(RunDetection("num_classes: 3 code_type: CENTER_SIZE confidence_threshold: 0.15",
                          {2, 12, 1, 1}, loc, {2, 9}, conf, kPriors, DataType::kFloat64),
             {Row(0, 1, 0.8, kP0), Row(0, 1, 0.2, kP2), Row(0, 2, 0.5, kP2)});
  // Swapped: the detections belong to image 1.
  std::vector<double> swapped_conf = low;
  swapped_conf.insert(swapped_conf.end(), kConf.begin(), kConf.end());
  ExpectRows(RunDetection("num_classes: 3 code_type: CENTER_SIZE confidence_threshold: 0.15",
                          {2, 12, 1, 1}, loc, {2, 9}, swapped_conf, kPriors, DataType::kFloat64),
             {Row(1, 1, 0.8, kP0), Row(1, 1, 0.2, kP2), Row(1, 2, 0.5, kP2)});
}

// No detection anywhere: SSD's placeholder, one row [i, -1, ...] per image.
TEST(DetectionOutputLayer, NothingDetected) {
  std::vector<double> loc = kLoc;
  loc.insert(loc.end(), kLoc.begin(), kLoc.end());
  const std::vector<double> low(18, 0.05);
  std::vector<int> shape;
  const Rows rows = RunDetection("num_classes: 3 confidence_threshold: 0.15", {2, 12}, loc, {2, 9},
                                 low, kPriors, DataType::kFloat32, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 2, 7}));
  ExpectRows(rows, {{0, -1, -1, -1, -1, -1, -1}, {1, -1, -1, -1, -1, -1, -1}}, 0);
}

// CORNER and CORNER_SIZE decoding, with per-class locations and variance in the target.
TEST(DetectionOutputLayer, CornerDecodings) {
  const std::vector<double> prior = {0.1, 0.2, 0.5, 0.6, 0.1, 0.1, 0.2, 0.2};
  const std::vector<double> conf = {0.4, 0.6};
  // Location classes: background (ignored), class 1.
  const std::vector<double> loc = {9, 9, 9, 9, 0.01, 0.02, -0.01, 0.03};
  ExpectRows(RunDetection("num_classes: 2 share_location: false code_type: CORNER "
                          "variance_encoded_in_target: true",
                          {1, 8}, loc, {1, 2}, conf, prior, DataType::kFloat64),
             {Row(0, 1, 0.6, {0.11, 0.22, 0.49, 0.63})});
  // CORNER with the variance: prior + v * t.
  ExpectRows(RunDetection("num_classes: 2 share_location: false code_type: CORNER", {1, 8}, loc,
                          {1, 2}, conf, prior, DataType::kFloat64),
             {Row(0, 1, 0.6, {0.101, 0.202, 0.498, 0.606})});
  // CORNER_SIZE: prior + v * t * (prior width or height), t = 1, prior 0.4 x 0.4.
  const std::vector<double> ones = {9, 9, 9, 9, 1, 1, 1, 1};
  ExpectRows(RunDetection("num_classes: 2 share_location: false code_type: CORNER_SIZE", {1, 8},
                          ones, {1, 2}, conf, prior, DataType::kFloat64),
             {Row(0, 1, 0.6, {0.14, 0.24, 0.58, 0.68})});
  // CENTER_SIZE with variance in the target: centre + t * size, size * e^t.
  const std::vector<double> center = {9, 9, 9, 9, 0.5, 0, std::log(0.5), 0};
  ExpectRows(RunDetection("num_classes: 2 share_location: false code_type: CENTER_SIZE "
                          "variance_encoded_in_target: true",
                          {1, 8}, center, {1, 2}, conf, prior, DataType::kFloat64),
             {Row(0, 1, 0.6, {0.4, 0.2, 0.6, 0.6})});
}

TEST(DetectionOutputLayer, NoGradient) {
  auto layer = CreateLayer("type: 'DetectionOutput' detection_output_param { num_classes: 3 }");
  auto loc = MakeBlob({1, 12}, kLoc), conf = MakeBlob({1, 9}, kConf),
       prior = MakeBlob({1, 2, 12}, kPriors);
  Blob top(DataType::kFloat64);
  const BlobVec bottom = {loc.get(), conf.get(), prior.get()};
  layer->SetUp(bottom, {&top});
  layer->Forward(bottom, {&top});
  SetDiffOf(loc.get(), std::vector<double>(12, 1.0));
  layer->Backward({&top}, {true, false, false}, bottom);
  EXPECT_EQ(DiffOf(*loc), std::vector<double>(12, 0.0));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(layer->AllowForceBackward(i));
}

TEST(DetectionOutputLayer, Errors) {
  const std::vector<std::vector<int>> shapes = {{1, 12}, {1, 9}, {1, 2, 12}};
  auto expect = [&](const std::string& param, const std::string& field,
                    const std::vector<std::vector<int>>& bottoms) {
    ExpectSetUpError("type: 'DetectionOutput' detection_output_param { " + param + " }", bottoms,
                     field);
  };
  expect("", "detection_output_param.num_classes", shapes);
  expect("num_classes: 0", "detection_output_param.num_classes", shapes);
  expect("num_classes: 3 visualize: true", "detection_output_param.visualize", shapes);
  expect("num_classes: 3 nms_param { eta: 0 }", "detection_output_param.nms_param.eta", shapes);
  expect("num_classes: 3 nms_param { eta: 1.5 }", "detection_output_param.nms_param.eta", shapes);
  expect("num_classes: 3 nms_param { nms_threshold: -0.1 }",
         "detection_output_param.nms_param.nms_threshold", shapes);
  expect("num_classes: 3", "location predictions", {{1, 8}, {1, 9}, {1, 2, 12}});
  expect("num_classes: 4", "confidence predictions", shapes);
  expect("num_classes: 3 share_location: false", "location predictions", shapes);
  expect("num_classes: 3", "same number of images", {{2, 12}, {1, 9}, {1, 2, 12}});
  expect("num_classes: 3", "prior bottom", {{1, 12}, {1, 9}, {1, 24}});
  // A save_output_param writes nothing and is accepted, with or without a directory: SSD's
  // published deploy nets carry one (with files that exist only on the author's machine).
  for (const char* save :
       {"output_name_prefix: 'x'",
        "output_directory: '/nonexistent/results/Main' output_format: 'VOC' "
        "label_map_file: 'data/VOC0712/labelmap_voc.prototxt' "
        "name_size_file: 'data/VOC0712/test_name_size.txt' num_test_image: 4952"}) {
    auto layer =
        CreateLayer(std::string("type: 'DetectionOutput' detection_output_param { num_classes: 3 "
                                "save_output_param { ") +
                    save + " } }");
    auto loc = MakeBlob({1, 12}, kLoc), conf = MakeBlob({1, 9}, kConf),
         prior = MakeBlob({1, 2, 12}, kPriors);
    Blob top(DataType::kFloat64);
    EXPECT_NO_THROW(layer->SetUp({loc.get(), conf.get(), prior.get()}, {&top})) << save;
    EXPECT_EQ(top.shape(), (std::vector<int>{1, 1, 1, 7})) << save;
  }
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/results/Main"));
}

}  // namespace
}  // namespace crema::testing
