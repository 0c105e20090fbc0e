#include "layers/detection_evaluate/detection_evaluate_layer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

namespace crema::testing {
namespace {

using Rows = std::vector<std::vector<double>>;

std::vector<double> Flatten(const Rows& rows) {
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

// Detection and ground truth rows.
std::vector<double> Det(double image, double label, double score, std::vector<double> box) {
  return {image, label, score, box[0], box[1], box[2], box[3]};
}
std::vector<double> Gt(double item, double label, std::vector<double> box, bool difficult = false) {
  return {item, label, 0, box[0], box[1], box[2], box[3], difficult ? 1.0 : 0.0};
}

// A DetectionEvaluate layer with `param` (inside detection_evaluate_param) that keeps its state
// across Forward calls.
class Evaluator {
 public:
  Evaluator(const std::string& param, DataType dtype = DataType::kFloat64)
      : dtype_(dtype),
        layer_(CreateLayer("type: 'DetectionEvaluate' detection_evaluate_param { " + param + " }",
                           dtype)) {}

  Rows Run(const Rows& detections, const Rows& ground_truth) {
    auto det =
        MakeBlob({1, 1, static_cast<int>(detections.size()), 7}, Flatten(detections), dtype_);
    auto gt =
        MakeBlob({1, 1, static_cast<int>(ground_truth.size()), 8}, Flatten(ground_truth), dtype_);
    Blob top(dtype_);
    const BlobVec bottom = {det.get(), gt.get()};
    if (!set_up_) layer_->SetUp(bottom, {&top});
    set_up_ = true;
    layer_->Reshape(bottom, {&top});
    const std::vector<int> reshaped = top.shape();
    layer_->Forward(bottom, {&top});
    EXPECT_EQ(top.shape(), reshaped) << "Reshape and Forward disagree on the top's shape";
    EXPECT_EQ(top.num_axes(), 4);
    EXPECT_EQ(top.shape(3), 5);
    const std::vector<double> data = DataOf(top);
    Rows rows;
    for (size_t i = 0; i < data.size(); i += 5)
      rows.emplace_back(data.begin() + i, data.begin() + i + 5);
    return rows;
  }

 private:
  DataType dtype_;
  std::unique_ptr<Layer> layer_;
  bool set_up_ = false;
};

void ExpectRows(const Rows& actual, const Rows& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t r = 0; r < actual.size(); ++r)
    for (size_t k = 0; k < 5; ++k)
      EXPECT_NEAR(actual[r][k], expected[r][k], 1e-6) << "row " << r << " column " << k;
}

const std::vector<double> kA = {0.1, 0.1, 0.4, 0.4};
const std::vector<double> kB = {0.6, 0.6, 0.9, 0.9};
const std::vector<double> kC = {0.5, 0.1, 0.9, 0.4};
const std::vector<double> kD = {0.2, 0.2, 0.5, 0.5};
const std::vector<double> kFar = {0.4, 0.6, 0.5, 0.7};  // meets no box above

// Image 0: class 1 boxes A and B, class 2 box C; image 1: class 1 box D. Per image and label the
// detections go by score: the best match of A (IoU 0.875, score 0.9) takes it, A itself (0.6)
// comes second and is a duplicate; a box meeting nothing is false; C is found (0.8) and a second
// detection of it (IoU 0.75, 0.3) is a duplicate; a label (image 1, class 2) or an image (2)
// without ground truth gives false positives only, in input order.
TEST(DetectionEvaluateLayer, TruePositivesByScoreAndOverlap) {
  const Rows detections = {Det(0, 1, 0.6, kA),
                           Det(0, 2, 0.3, {0.5, 0.1, 0.8, 0.4}),
                           Det(0, 1, 0.9, {0.12, 0.1, 0.42, 0.4}),
                           Det(0, 1, 0.7, kFar),
                           Det(0, 2, 0.8, kC),
                           Det(1, 2, 0.4, kD),
                           Det(1, 2, 0.45, kFar),
                           Det(1, 1, 0.5, kD),
                           Det(2, 1, 0.2, kA)};
  const Rows ground_truth = {Gt(0, 1, kA), Gt(0, 1, kB), Gt(0, 2, kC), Gt(1, 1, kD)};
  const Rows expected = {{-1, 1, 3, -1, -1}, {-1, 2, 1, -1, -1},                      //
                         {0, 1, 0.9, 1, 0},  {0, 1, 0.7, 0, 1},  {0, 1, 0.6, 0, 1},   //
                         {0, 2, 0.8, 1, 0},  {0, 2, 0.3, 0, 1},                       //
                         {1, 1, 0.5, 1, 0},  {1, 2, 0.4, 0, 1},  {1, 2, 0.45, 0, 1},  //
                         {2, 1, 0.2, 0, 1}};
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    Evaluator evaluator("num_classes: 3", dtype);
    ExpectRows(evaluator.Run(detections, ground_truth), expected);
  }
  // A higher threshold than A's best match (0.875) makes every detection of image 0's class 1
  // false but A itself (0.6), which now takes A.
  Evaluator strict("num_classes: 3 overlap_threshold: 0.9");
  const Rows rows = strict.Run(detections, ground_truth);
  ASSERT_EQ(rows.size(), expected.size());
  ExpectRows({rows[2], rows[3], rows[4]},
             {{0, 1, 0.9, 0, 1}, {0, 1, 0.7, 0, 1}, {0, 1, 0.6, 1, 0}});
}

// background_label_id 2: classes 0 and 1 have positives rows; labels may be 0.
TEST(DetectionEvaluateLayer, BackgroundLabel) {
  Evaluator evaluator("num_classes: 3 background_label_id: 2");
  ExpectRows(evaluator.Run({Det(0, 0, 0.5, kA)}, {Gt(0, 0, kA), Gt(0, 1, kB)}),
             {{-1, 0, 1, -1, -1}, {-1, 1, 1, -1, -1}, {0, 0, 0.5, 1, 0}});
  Evaluator bad_gt("num_classes: 3");
  EXPECT_THROW(bad_gt.Run({Det(0, 1, 0.5, kA)}, {Gt(0, 0, kA)}), RuntimeError);
  Evaluator bad_det("num_classes: 3");
  EXPECT_THROW(bad_det.Run({Det(0, 0, 0.5, kA)}, {Gt(0, 1, kA)}), RuntimeError);
}

// Difficult box A and plain box B of class 1. Without evaluate_difficult_gt, A is no positive
// and a detection whose best box is A is neither true nor false (0, 0), even a second one; with
// it (the default), A counts like B.
TEST(DetectionEvaluateLayer, DifficultGroundTruth) {
  const Rows detections = {Det(0, 1, 0.9, kA), Det(0, 1, 0.8, kB), Det(0, 1, 0.7, kA)};
  const Rows ground_truth = {Gt(0, 1, kA, true), Gt(0, 1, kB)};
  Evaluator skip("num_classes: 2 evaluate_difficult_gt: false");
  ExpectRows(skip.Run(detections, ground_truth),
             {{-1, 1, 1, -1, -1}, {0, 1, 0.9, 0, 0}, {0, 1, 0.8, 1, 0}, {0, 1, 0.7, 0, 0}});
  Evaluator count("num_classes: 2");
  ExpectRows(count.Run(detections, ground_truth),
             {{-1, 1, 2, -1, -1}, {0, 1, 0.9, 1, 0}, {0, 1, 0.8, 1, 0}, {0, 1, 0.7, 0, 1}});
}

// DetectionOutput's placeholder (no detection kept: label -1 per image) and AnnotatedData's (no
// ground truth: item -1, which also ends the rows read) give positives rows only; a detection
// row with image -1 has its place in the top, all zero.
TEST(DetectionEvaluateLayer, Placeholders) {
  const std::vector<double> none = {-1, -1, -1, -1};
  Evaluator evaluator("num_classes: 3");
  ExpectRows(
      evaluator.Run({Det(0, -1, -1, none), Det(1, -1, -1, none)}, {Gt(-1, -1, none), Gt(0, 1, kA)}),
      {{-1, 1, 0, -1, -1}, {-1, 2, 0, -1, -1}});
  ExpectRows(evaluator.Run({Det(-1, 1, 0.5, kA), Det(0, 1, 0.4, kA)}, {Gt(0, 1, kA)}),
             {{-1, 1, 1, -1, -1}, {-1, 2, 0, -1, -1}, {0, 1, 0.4, 1, 0}, {0, 0, 0, 0, 0}});
}

// name_size_file: overlaps in pixels of each image (+1 per side, as Caffe-SSD). gt (0, 0, 0.2,
// 0.2) and detection (0.1, 0.1, 0.3, 0.3) overlap 1/7 normalized; on a 10 x 10 image they are
// (0, 0, 2, 2) and (1, 1, 3, 3): 3 x 3 pixels each, 2 x 2 in common, 4 / 14 = 0.29; on 100 x 100,
// 11 x 11 / (2 * 21 x 21 - 121) = 0.16. With threshold 0.2 only the 10 x 10 images find it. The
// file's lines go to the images in turn across Forward calls and wrap.
TEST(DetectionEvaluateLayer, NameSizeFileScalesToImages) {
  const std::string dir = ::testing::TempDir() + "/detection_evaluate_sizes";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/test_name_size.txt";
  {
    std::ofstream out(file);
    out << "img_a 10 10\nimg_b 100 100\nimg_c 100 100\n";
  }
  const std::vector<double> gt_box = {0, 0, 0.2, 0.2}, det_box = {0.1, 0.1, 0.3, 0.3};
  Evaluator normalized("num_classes: 2 overlap_threshold: 0.2");
  EXPECT_EQ(normalized.Run({Det(0, 1, 0.5, det_box)}, {Gt(0, 1, gt_box)})[1][3], 0);

  Evaluator scaled("num_classes: 2 overlap_threshold: 0.2 name_size_file: '" + file + "'");
  // Images 0 and 1: lines 1 (10 x 10) and 2 (100 x 100).
  ExpectRows(scaled.Run({Det(0, 1, 0.5, det_box), Det(1, 1, 0.5, det_box)},
                        {Gt(0, 1, gt_box), Gt(1, 1, gt_box)}),
             {{-1, 1, 2, -1, -1}, {0, 1, 0.5, 1, 0}, {1, 1, 0.5, 0, 1}});
  // Line 3 (100 x 100), then line 1 again (10 x 10).
  EXPECT_EQ(scaled.Run({Det(0, 1, 0.5, det_box)}, {Gt(0, 1, gt_box)})[1][3], 0);
  EXPECT_EQ(scaled.Run({Det(0, 1, 0.5, det_box)}, {Gt(0, 1, gt_box)})[1][3], 1);

  // FIT_SMALL_SIZE without height_scale and width_scale maps the boxes as without resize.
  Evaluator warp("num_classes: 2 overlap_threshold: 0.2 name_size_file: '" + file +
                 "' resize_param { resize_mode: FIT_SMALL_SIZE height: 10 width: 10 }");
  EXPECT_EQ(warp.Run({Det(0, 1, 0.5, det_box)}, {Gt(0, 1, gt_box)})[1][3], 1);
}

TEST(DetectionEvaluateLayer, ConfigErrors) {
  ExpectSetUpError("type: 'DetectionEvaluate'", {{1, 1, 1, 7}, {1, 1, 1, 8}},
                   "detection_evaluate_param.num_classes");
  ExpectSetUpError(
      "type: 'DetectionEvaluate' detection_evaluate_param { num_classes: 2 overlap_threshold: 0 }",
      {{1, 1, 1, 7}, {1, 1, 1, 8}}, "detection_evaluate_param.overlap_threshold");
  auto layer = CreateLayer(
      "type: 'DetectionEvaluate' detection_evaluate_param { num_classes: 2 name_size_file: "
      "'/nonexistent/sizes.txt' }");
  auto det = MakeBlob({1, 1, 1, 7}, {});
  auto gt = MakeBlob({1, 1, 1, 8}, {});
  Blob top(DataType::kFloat64);
  EXPECT_THROW(layer->SetUp({det.get(), gt.get()}, {&top}), RuntimeError);
  // Shapes: detections need 7 columns, ground truth 8.
  auto wrong = CreateLayer("type: 'DetectionEvaluate' detection_evaluate_param { num_classes: 2 }");
  auto det6 = MakeBlob({1, 1, 1, 6}, {});
  EXPECT_THROW(wrong->SetUp({det6.get(), gt.get()}, {&top}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
