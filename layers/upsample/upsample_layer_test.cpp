#include "layers/upsample/upsample_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Upsample, LayerCase("", {{2, 3, 3, 4}}).Name("nearest_default"),
    LayerCase("upsample_param { scale: 3 }", {{1, 2, 2, 3}}).Name("nearest_scale3"),
    LayerCase("upsample_param { scale_h: 2 scale_w: 3 }", {{2, 2, 3, 2}}).Name("nearest_scale_hw"),
    LayerCase("upsample_param { upsample_h: 7 upsample_w: 5 }", {{1, 2, 3, 4}})
        .Name("nearest_exact_size"),
    LayerCase("upsample_param { upsample_h: 2 upsample_w: 3 }", {{1, 2, 5, 7}})
        .Name("nearest_shrink"),
    LayerCase("upsample_param { mode: BILINEAR }", {{2, 3, 3, 4}}).Name("bilinear_half_pixel"),
    LayerCase("upsample_param { mode: BILINEAR align_corners: true }", {{2, 3, 3, 4}})
        .Name("bilinear_align_corners"),
    LayerCase("upsample_param { mode: BILINEAR scale_h: 3 scale_w: 2 }", {{1, 2, 3, 3}})
        .Name("bilinear_scale_hw"),
    LayerCase("upsample_param { mode: BILINEAR upsample_h: 7 upsample_w: 4 }", {{1, 2, 3, 5}})
        .Name("bilinear_exact_size"),
    LayerCase("upsample_param { mode: BILINEAR align_corners: true upsample_h: 7 upsample_w: 1 }",
              {{1, 2, 3, 5}})
        .Name("bilinear_align_exact_size"),
    LayerCase("upsample_param { mode: BILINEAR upsample_h: 2 upsample_w: 3 }", {{2, 5, 7}})
        .Name("bilinear_shrink_3d"));

namespace crema::testing {
namespace {

std::vector<double> Resize(const std::string& param, const std::vector<int>& shape,
                           const std::vector<double>& values, std::vector<int>* top_shape) {
  auto layer = CreateLayer("type: 'Upsample' " + param);
  auto bottom = MakeBlob(shape, values);
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  *top_shape = top.shape();
  return DataOf(top);
}

void ExpectValuesNear(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

TEST(UpsampleValues, NearestScale2) {
  std::vector<int> shape;
  const std::vector<double> top = Resize("", {1, 1, 2, 2}, {1, 2, 3, 4}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 4, 4}));
  EXPECT_EQ(top, (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(UpsampleValues, NearestExactSizeFloorsLikePyTorch) {
  // 3 -> 7 rows: floor(y * 3 / 7) = 0 0 0 1 1 2 2; 2 -> 3 columns: floor(x * 2 / 3) = 0 0 1.
  std::vector<int> shape;
  const std::vector<double> top = Resize("upsample_param { upsample_h: 7 upsample_w: 3 }",
                                         {1, 3, 2}, {1, 2, 3, 4, 5, 6}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 7, 3}));
  EXPECT_EQ(top,
            (std::vector<double>{1, 1, 2, 1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4, 5, 5, 6, 5, 5, 6}));
}

TEST(UpsampleValues, Bilinear2x2To4x4HalfPixel) {
  // PyTorch: F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False).
  std::vector<int> shape;
  const std::vector<double> top =
      Resize("upsample_param { mode: BILINEAR }", {1, 1, 2, 2}, {1, 2, 3, 4}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 4, 4}));
  ExpectValuesNear(top, {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0,
                         3.25, 3.75, 4.0});
}

TEST(UpsampleValues, Bilinear2x2To4x4AlignCorners) {
  // align_corners=True: top[y][x] = 1 + x / 3 + 2 * y / 3 for this input.
  std::vector<int> shape;
  const std::vector<double> top = Resize("upsample_param { mode: BILINEAR align_corners: true }",
                                         {1, 1, 2, 2}, {1, 2, 3, 4}, &shape);
  std::vector<double> expected;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) expected.push_back(1.0 + x / 3.0 + 2.0 * y / 3.0);
  ExpectValuesNear(top, expected);
}

TEST(UpsampleValues, BilinearDownsizeHalfPixel) {
  // 4 -> 2 columns: source x = (x + 0.5) * 2 - 0.5 = 0.5, 2.5: the means of pairs.
  std::vector<int> shape;
  const std::vector<double> top =
      Resize("upsample_param { mode: BILINEAR upsample_h: 1 upsample_w: 2 }", {1, 1, 1, 4},
             {1, 3, 10, 20}, &shape);
  ExpectValuesNear(top, {2.0, 15.0});
}

std::vector<double> BackwardOf(const std::string& param, const std::vector<int>& shape,
                               const std::vector<double>& top_diff) {
  auto layer = CreateLayer("type: 'Upsample' " + param);
  auto bottom = MakeBlob(shape, {});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, top_diff);
  SetDiffOf(bottom.get(), std::vector<double>(bottom->count(), 99.0));  // must be overwritten
  layer->Backward({&top}, {true}, {bottom.get()});
  return DiffOf(*bottom);
}

TEST(UpsampleBackward, NearestSumsBlocks) {
  std::vector<double> dy(16);
  for (int i = 0; i < 16; ++i) dy[i] = i;
  // Block (0, 0) holds top 0 1 4 5, and so on.
  EXPECT_EQ(BackwardOf("", {1, 1, 2, 2}, dy), (std::vector<double>{10, 18, 42, 50}));
}

TEST(UpsampleBackward, BilinearScattersWeights) {
  // Top (1, 2) reads rows 0/1 with weights 0.75/0.25 and columns 0/1 with 0.25/0.75.
  std::vector<double> dy(16, 0.0);
  dy[1 * 4 + 2] = 1.0;
  ExpectValuesNear(BackwardOf("upsample_param { mode: BILINEAR }", {1, 1, 2, 2}, dy),
                   {0.1875, 0.5625, 0.0625, 0.1875});
  // align_corners: top (1, 2) is source (1/3, 2/3).
  ExpectValuesNear(
      BackwardOf("upsample_param { mode: BILINEAR align_corners: true }", {1, 1, 2, 2}, dy),
      {2.0 / 9, 4.0 / 9, 1.0 / 9, 2.0 / 9});
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Upsample' " + param);
  auto bottom = MakeBlob({1, 2, 3, 3}, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Upsample)"), std::string::npos)
        << e.what();
  }
}

TEST(UpsampleErrors, Messages) {
  ExpectError("upsample_param { scale: 0 }", "upsample_param.scale must be > 0");
  ExpectError("upsample_param { scale_h: 2 }", "upsample_param.scale_w");
  ExpectError("upsample_param { scale_w: 2 }", "upsample_param.scale_h");
  ExpectError("upsample_param { scale_h: 0 scale_w: 2 }", "upsample_param.scale_h must be > 0");
  ExpectError("upsample_param { scale_h: 2 scale_w: 0 }", "upsample_param.scale_w must be > 0");
  ExpectError("upsample_param { scale: 2 scale_h: 2 scale_w: 2 }", "upsample_param.scale");
  ExpectError("upsample_param { upsample_h: 4 }", "upsample_param.upsample_w");
  ExpectError("upsample_param { upsample_w: 4 }", "upsample_param.upsample_h");
  ExpectError("upsample_param { upsample_h: 0 upsample_w: 4 }",
              "upsample_param.upsample_h must be > 0");
  ExpectError("upsample_param { upsample_h: 4 upsample_w: 0 }",
              "upsample_param.upsample_w must be > 0");
  ExpectError("upsample_param { upsample_h: 4 upsample_w: 4 scale: 2 }",
              "upsample_param.upsample_h");
  ExpectError("upsample_param { align_corners: true }", "upsample_param.align_corners");
  ExpectError("upsample_param { mode: NEAREST align_corners: false }",
              "upsample_param.align_corners");
}

TEST(UpsampleErrors, NotInPlace) {
  auto layer = CreateLayer("type: 'Upsample'");
  auto blob = MakeBlob({1, 1, 2, 2}, {});
  EXPECT_THROW(layer->SetUp({blob.get()}, {blob.get()}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
