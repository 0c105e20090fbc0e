#include "layers/interp/interp_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Interp, LayerCase("interp_param { zoom_factor: 2 }", {{2, 3, 3, 4}}).Name("zoom"),
    LayerCase("interp_param { shrink_factor: 2 }", {{2, 2, 7, 5}}).Name("shrink"),
    LayerCase("interp_param { height: 5 width: 7 }", {{1, 2, 3, 4}}).Name("height_width"),
    LayerCase("interp_param { height: 2 width: 3 }", {{1, 2, 5, 7}}).Name("height_width_down"),
    LayerCase("interp_param { height: 3 width: 4 }", {{1, 2, 3, 4}}).Name("same_size_copy"),
    LayerCase("interp_param { height: 1 width: 3 }", {{1, 2, 4, 4}}).Name("one_row"),
    LayerCase("interp_param { zoom_factor: 3 shrink_factor: 2 }", {{1, 2, 5, 6}})
        .Name("shrink_then_zoom"),
    LayerCase("interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -2 }", {{1, 2, 6, 5}})
        .Name("crop_zoom"),
    LayerCase("interp_param { pad_beg: -1 pad_end: -1 zoom_factor: 1 }", {{1, 2, 5, 5}})
        .Name("crop_only"),
    LayerCase("", {{2, 3, 3, 3}, {1, 1, 5, 7}}).NoGradient(1).Name("second_bottom"));

namespace crema::testing {
namespace {

std::vector<double> Resize(const std::string& param, const std::vector<int>& shape,
                           const std::vector<double>& values, std::vector<int>* top_shape) {
  auto layer = CreateLayer("type: 'Interp' " + param);
  auto bottom = MakeBlob(shape, values);
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  *top_shape = top.shape();
  return DataOf(top);
}

std::vector<int> TopShape(const std::string& param, const std::vector<int>& shape) {
  std::vector<int> top_shape;
  Resize(param, shape, {}, &top_shape);
  return top_shape;
}

void ExpectValuesNear(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

TEST(InterpValues, Zoom2On3x3) {
  // Aligned corners: the even outputs are the inputs, the odd ones means of their neighbours.
  std::vector<int> shape;
  const std::vector<double> top =
      Resize("interp_param { zoom_factor: 2 }", {1, 1, 3, 3}, {1, 2, 4, 0, 3, 1, 5, 2, 0}, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 5, 5}));
  ExpectValuesNear(top, {1,   1.5, 2,   3,   4,    //
                         0.5, 1.5, 2.5, 2.5, 2.5,  //
                         0,   1.5, 3,   2,   1,    //
                         2.5, 2.5, 2.5, 1.5, 0.5,  //
                         5,   3.5, 2,   1,   0});
}

TEST(InterpValues, ExplicitSizeUsesCornerRatio) {
  // 2 -> 4 columns: ratio 1/3, sources 0, 1/3, 2/3, 1.
  std::vector<int> shape;
  const std::vector<double> top =
      Resize("interp_param { height: 1 width: 4 }", {1, 1, 1, 2}, {0, 3}, &shape);
  ExpectValuesNear(top, {0, 1, 2, 3});
}

TEST(InterpValues, CropCopiesTheWindow) {
  // pad_beg -1, pad_end -2 on 5x5 leaves rows/columns 1..2; zoom 1 keeps that size: a copy.
  std::vector<double> values(25);
  for (int i = 0; i < 25; ++i) values[i] = i;
  std::vector<int> shape;
  const std::vector<double> top = Resize("interp_param { zoom_factor: 1 pad_beg: -1 pad_end: -2 }",
                                         {1, 1, 5, 5}, values, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 2, 2}));
  EXPECT_EQ(top, (std::vector<double>{6, 7, 11, 12}));
}

TEST(InterpValues, CropThenZoom) {
  // The 2x2 window (rows/columns 1..2) of a 4x4 ramp zoomed to 3x3.
  std::vector<double> values(16);
  for (int i = 0; i < 16; ++i) values[i] = i;
  std::vector<int> shape;
  const std::vector<double> top = Resize("interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -1 }",
                                         {1, 1, 4, 4}, values, &shape);
  EXPECT_EQ(shape, (std::vector<int>{1, 1, 3, 3}));
  ExpectValuesNear(top, {5, 5.5, 6, 7, 7.5, 8, 9, 9.5, 10});
}

TEST(InterpShape, PspNetRules) {
  EXPECT_EQ(TopShape("interp_param { zoom_factor: 8 }", {1, 2, 60, 61}),
            (std::vector<int>{1, 2, 473, 481}));
  EXPECT_EQ(TopShape("interp_param { shrink_factor: 2 }", {1, 1, 7, 5}),
            (std::vector<int>{1, 1, 4, 3}));
  EXPECT_EQ(TopShape("interp_param { shrink_factor: 8 }", {2, 1, 473, 473}),
            (std::vector<int>{2, 1, 60, 60}));
  // Shrink first ((7-1)/2+1 = 4, (5-1)/2+1 = 3), then zoom 3: 4 + 3 * 2 = 10, 3 + 2 * 2 = 7.
  EXPECT_EQ(TopShape("interp_param { zoom_factor: 3 shrink_factor: 2 }", {1, 1, 7, 5}),
            (std::vector<int>{1, 1, 10, 7}));
  EXPECT_EQ(TopShape("interp_param { height: 9 width: 2 }", {3, 2, 4, 4}),
            (std::vector<int>{3, 2, 9, 2}));
  // Crop: 8 - 1 - 2 = 5, 9 - 3 = 6; zoom 2: 9, 11.
  EXPECT_EQ(TopShape("interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -2 }", {1, 1, 8, 9}),
            (std::vector<int>{1, 1, 9, 11}));
}

TEST(InterpShape, SecondBottomGivesTheSize) {
  auto layer = CreateLayer("type: 'Interp'");
  auto bottom = MakeBlob({2, 3, 4, 4}, {});
  auto like = MakeBlob({1, 7, 6, 9}, {});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get(), like.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 3, 6, 9}));
  like->Reshape({1, 1, 2, 3});
  layer->Reshape({bottom.get(), like.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 3, 2, 3}));
  EXPECT_TRUE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->AllowForceBackward(1));
}

TEST(InterpBackward, ScattersWithCornerWeights) {
  // 2x2 -> 3x3: the middle row/column splits 0.5/0.5; a ones top diff gives 1.5 * 1.5 per pixel.
  auto layer = CreateLayer("type: 'Interp' interp_param { zoom_factor: 2 }");
  auto bottom = MakeBlob({1, 1, 2, 2}, {1, 2, 3, 4});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, std::vector<double>(9, 1.0));
  SetDiffOf(bottom.get(), std::vector<double>(4, 99.0));
  layer->Backward({&top}, {true}, {bottom.get()});
  ExpectValuesNear(DiffOf(*bottom), {2.25, 2.25, 2.25, 2.25});
  // One top pixel, (1, 2): rows 0/1 at 0.5/0.5, column 1.
  std::vector<double> dy(9, 0.0);
  dy[5] = 1.0;
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true}, {bottom.get()});
  ExpectValuesNear(DiffOf(*bottom), {0, 0.5, 0, 0.5});
}

TEST(InterpBackward, CroppedBorderGetsZero) {
  auto layer =
      CreateLayer("type: 'Interp' interp_param { zoom_factor: 1 pad_beg: -1 pad_end: -1 }");
  auto bottom = MakeBlob({1, 1, 3, 3}, {});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, {7.0});
  SetDiffOf(bottom.get(), std::vector<double>(9, 99.0));
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{0, 0, 0, 0, 7, 0, 0, 0, 0}));
}

void ExpectError(const std::string& param, const std::vector<int>& shape,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Interp' " + param);
  auto bottom = MakeBlob(shape, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Interp)"), std::string::npos) << e.what();
  }
}

TEST(InterpErrors, Messages) {
  const std::vector<int> shape = {1, 2, 5, 5};
  ExpectError("", shape, "interp_param must give the output size");
  ExpectError("interp_param { zoom_factor: 0 }", shape, "interp_param.zoom_factor must be >= 1");
  ExpectError("interp_param { shrink_factor: -1 }", shape,
              "interp_param.shrink_factor must be >= 1");
  ExpectError("interp_param { height: 4 }", shape, "interp_param.width");
  ExpectError("interp_param { width: 4 }", shape, "interp_param.height");
  ExpectError("interp_param { height: 0 width: 4 }", shape, "interp_param.height must be > 0");
  ExpectError("interp_param { height: 4 width: -2 }", shape, "interp_param.width must be > 0");
  ExpectError("interp_param { zoom_factor: 2 pad_beg: 1 }", shape, "interp_param.pad_beg");
  ExpectError("interp_param { zoom_factor: 2 pad_end: 2 }", shape, "interp_param.pad_end");
  ExpectError("interp_param { zoom_factor: 2 pad_beg: -3 pad_end: -2 }", shape,
              "crop the whole input");
}

}  // namespace
}  // namespace crema::testing
