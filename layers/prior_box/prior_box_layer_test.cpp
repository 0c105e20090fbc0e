#include "layers/prior_box/prior_box_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    PriorBox,
    LayerCase("prior_box_param { min_size: 30 max_size: 60 aspect_ratio: 2 flip: true clip: true "
              "variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 }",
              {{1, 3, 2, 2}, {1, 3, 300, 300}})
        .NoGradient(0)
        .NoGradient(1)
        .NoGradientCheck()
        .Name("ssd"),
    LayerCase("prior_box_param { min_size: 10 min_size: 20 aspect_ratio: 3 flip: false img_h: 40 "
              "img_w: 60 step_h: 8 step_w: 12 offset: 0.25 }",
              {{2, 1, 3, 4}, {2, 3, 7, 7}})
        .NoGradient(0)
        .NoGradient(1)
        .NoGradientCheck()
        .Name("explicit_geometry"));

namespace crema::testing {
namespace {

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << what << " [" << i << "]";
}

// Runs PriorBox on a map of (map_h, map_w) and an image of (img_h, img_w); returns the top.
std::vector<double> RunPriorBox(const std::string& param, int map_h, int map_w, int img_h,
                                int img_w, DataType dtype, std::vector<int>* shape) {
  auto layer = CreateLayer("type: 'PriorBox' prior_box_param { " + param + " }", dtype);
  Blob map(std::vector<int>{1, 8, map_h, map_w}, dtype), image({1, 3, img_h, img_w}, dtype);
  Blob top(dtype);
  layer->SetUp({&map, &image}, {&top});
  layer->Forward({&map, &image}, {&top});
  *shape = top.shape();
  return DataOf(top);
}

// A 2x2 map on a 300 image: step 150, centres 75 and 225. Per cell: the 30 box, the
// sqrt(30 * 60) box, then ratio 2 (30 sqrt2 x 30 / sqrt2) and its flip 1/2.
TEST(PriorBoxLayer, SsdBoxesByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    std::vector<int> shape;
    const std::vector<double> top = RunPriorBox(
        "min_size: 30 max_size: 60 aspect_ratio: 2 flip: true clip: true variance: 0.1 "
        "variance: 0.1 variance: 0.2 variance: 0.2",
        2, 2, 300, 300, dtype, &shape);
    EXPECT_EQ(shape, (std::vector<int>{1, 2, 2 * 2 * 4 * 4}));
    const double big = std::sqrt(30.0 * 60.0) / 2;  // half sides
    const double wide = 30 * std::sqrt(2.0) / 2, narrow = 30 / std::sqrt(2.0) / 2;
    std::vector<double> expected;
    for (double cy : {75.0, 225.0}) {
      for (double cx : {75.0, 225.0}) {
        const double halves[4][2] = {{15, 15}, {big, big}, {wide, narrow}, {narrow, wide}};
        for (const auto& half : halves) {
          const double half_w = half[0], half_h = half[1];
          expected.push_back((cx - half_w) / 300);
          expected.push_back((cy - half_h) / 300);
          expected.push_back((cx + half_w) / 300);
          expected.push_back((cy + half_h) / 300);
        }
      }
    }
    // The first cell's four boxes and the last cell's first, in numbers worked out by hand
    // (half sides 15, sqrt(1800) / 2 = 21.2132034, 30 sqrt2 / 2 and 30 / sqrt2 / 2), checked on
    // the layer's output independently of the loop above.
    const double first_cell[16] = {0.2,        0.2,        0.3,        0.3,
                                   0.17928932, 0.17928932, 0.32071068, 0.32071068,
                                   0.17928932, 0.21464466, 0.32071068, 0.28535534,
                                   0.21464466, 0.17928932, 0.28535534, 0.32071068};
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(top[i], first_cell[i], 1e-6) << i;
    const double last_cell_min_box[4] = {0.7, 0.7, 0.8, 0.8};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(top[48 + i], last_cell_min_box[i], 1e-6) << i;
    ExpectNear(std::vector<double>(top.begin(), top.begin() + 64),
               std::vector<double>(expected.begin(), expected.begin() + 64), 1e-6, "boxes");
    std::vector<double> variances(top.begin() + 64, top.end());
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(variances[i], i % 4 < 2 ? 0.1 : 0.2, 1e-7) << i;
  }
}

// A 120 box centred in a 100 image overflows by 0.1 on each side; clip clamps it. Variances are
// float parameters, so a float64 top holds 0.1f (1e-7 tolerance).
TEST(PriorBoxLayer, ClipAndDefaultVariance) {
  std::vector<int> shape;
  ExpectNear(RunPriorBox("min_size: 120", 1, 1, 100, 100, DataType::kFloat64, &shape),
             {-0.1, -0.1, 1.1, 1.1, 0.1, 0.1, 0.1, 0.1}, 1e-7, "unclipped");
  ExpectNear(RunPriorBox("min_size: 120 clip: true", 1, 1, 100, 100, DataType::kFloat64, &shape),
             {0, 0, 1, 1, 0.1, 0.1, 0.1, 0.1}, 1e-7, "clipped");
  ExpectNear(RunPriorBox("min_size: 120 variance: 0.5", 1, 1, 100, 100, DataType::kFloat64, &shape),
             {-0.1, -0.1, 1.1, 1.1, 0.5, 0.5, 0.5, 0.5}, 1e-12, "one variance");
}

// img_size and step override the bottoms; offset 0 puts centres on the cell corners; SSD keeps
// only the integer part of min_size (20.9 acts as 20).
TEST(PriorBoxLayer, ExplicitSizeStepOffset) {
  std::vector<int> shape;
  const std::vector<double> top = RunPriorBox("min_size: 20.9 img_size: 200 step: 100 offset: 0", 1,
                                              2, 7, 9, DataType::kFloat64, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 2, 8}));
  ExpectNear(std::vector<double>(top.begin(), top.begin() + 8),
             {-0.05, -0.05, 0.05, 0.05, 0.45, -0.05, 0.55, 0.05}, 1e-12, "boxes");
}

// Rectangular: img_h/img_w and step_h/step_w; ratio 4 without flip, then a second min_size.
TEST(PriorBoxLayer, RectangularImageAndRatioOrder) {
  std::vector<int> shape;
  const std::vector<double> top = RunPriorBox(
      "min_size: 10 min_size: 20 aspect_ratio: 4 aspect_ratio: 4.0000001 flip: false img_h: 50 "
      "img_w: 100 step_h: 25 step_w: 50",
      1, 1, 3, 3, DataType::kFloat64, &shape);
  // Priors: 10, 10 ratio 4 (20 x 5), 20, 20 ratio 4 (40 x 10); the duplicate ratio is dropped.
  EXPECT_EQ(shape, (std::vector<int>{1, 2, 4 * 4}));
  // Centre (25, 12.5).
  ExpectNear(std::vector<double>(top.begin(), top.begin() + 16),
             {20 / 100., 7.5 / 50, 30 / 100., 17.5 / 50, 15 / 100., 10 / 50., 35 / 100., 15 / 50.,
              15 / 100., 2.5 / 50, 35 / 100., 22.5 / 50, 5 / 100., 7.5 / 50, 45 / 100., 17.5 / 50},
             1e-12, "boxes");
}

TEST(PriorBoxLayer, NoGradient) {
  auto layer = CreateLayer("type: 'PriorBox' prior_box_param { min_size: 4 }");
  Blob map(std::vector<int>{1, 1, 2, 2}, DataType::kFloat64),
      image(std::vector<int>{1, 1, 8, 8}, DataType::kFloat64), top(DataType::kFloat64);
  layer->SetUp({&map, &image}, {&top});
  layer->Forward({&map, &image}, {&top});
  SetDiffOf(&map, {1, 2, 3, 4});
  layer->Backward({&top}, {true, false}, {&map, &image});
  EXPECT_EQ(DiffOf(map), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_FALSE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->AllowForceBackward(1));
}

TEST(PriorBoxLayer, Errors) {
  const std::vector<std::vector<int>> shapes = {{1, 1, 2, 2}, {1, 3, 8, 8}};
  auto expect = [&](const std::string& param, const std::string& field) {
    ExpectSetUpError("type: 'PriorBox' prior_box_param { " + param + " }", shapes, field);
  };
  expect("", "prior_box_param.min_size");
  expect("min_size: 0", "prior_box_param.min_size");
  expect("min_size: 4 max_size: 4", "prior_box_param.max_size");
  expect("min_size: 4 min_size: 5 max_size: 8", "prior_box_param.max_size");
  expect("min_size: 4 variance: 0.1 variance: 0.2", "prior_box_param.variance");
  expect("min_size: 4 variance: 0", "prior_box_param.variance");
  expect("min_size: 4 img_size: 8 img_h: 8 img_w: 8", "prior_box_param.img_size");
  expect("min_size: 4 img_h: 8", "prior_box_param.img_w");
  expect("min_size: 4 step: 2 step_w: 2 step_h: 2", "prior_box_param.step");
  expect("min_size: 4 step_w: 2", "prior_box_param.step_h");
  expect("min_size: 4 aspect_ratio: 0", "prior_box_param.aspect_ratio");
}

}  // namespace
}  // namespace crema::testing
