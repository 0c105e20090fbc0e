#include "layers/clip/clip_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    Clip,
    LayerCase("clip_param { min: -0.3 max: 0.4 }", {{2, 3, 4, 5}})
        .Range(-1, 0.1)
        .Kink(-0.3)
        .Eltwise()
        .Name("low"),
    LayerCase("clip_param { min: -0.3 max: 0.4 }", {{2, 3, 4, 5}})
        .Range(0, 1)
        .Kink(0.4)
        .Eltwise()
        .Name("high"),
    LayerCase("clip_param { min: -2 max: 2 }", {{3, 5}}).Eltwise().Name("wide"),
    LayerCase("clip_param { min: 0.5 max: 0.5 }", {{3, 5}}).Eltwise().Kink(0.5).Name("point"));

namespace crema::testing {
namespace {

// Runs the layer described by `text` on x (shape {n}) in float and double and expects the top
// to be `y` and, unless `derivative` is empty, the bottom diff to be dy * derivative for the top
// diff dy_i = 0.5 + 0.25 i.
void ExpectValues(const std::string& text, const std::vector<double>& x,
                  const std::vector<double>& y, const std::vector<double>& derivative) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tolerance = dtype == DataType::kFloat32 ? 2e-6 : 1e-12;
    auto layer = CreateLayer(text, dtype);
    auto bottom = MakeBlob({static_cast<int>(x.size())}, x, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    layer->Forward({bottom.get()}, {&top});
    const std::vector<double> top_data = DataOf(top);
    ASSERT_EQ(top_data.size(), y.size());
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(top_data[i], y[i], tolerance * std::max(1.0, std::abs(y[i]))) << "x = " << x[i];
    if (derivative.empty()) continue;
    std::vector<double> dy(x.size());
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5 + 0.25 * static_cast<double>(i);
    SetDiffOf(&top, dy);
    layer->Backward({&top}, {true}, {bottom.get()});
    const std::vector<double> dx = DiffOf(*bottom);
    for (size_t i = 0; i < dx.size(); ++i) {
      const double expected = dy[i] * derivative[i];
      EXPECT_NEAR(dx[i], expected, tolerance * std::max(1.0, std::abs(expected))) << "x = " << x[i];
    }
  }
}

// SetUp of the layer named "bad" described by `text` must throw a ConfigError naming `field`.
void ExpectParamError(const std::string& text, const std::vector<int>& shape,
                      const std::string& field) {
  SCOPED_TRACE(text);
  auto layer = CreateLayer("name: 'bad' " + text);
  Blob bottom(shape), top;
  try {
    layer->SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a ConfigError naming " << field;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\""), std::string::npos) << e.what();
  }
}

// BVLC Caffe's outputs for one layer of a reference net (bvlc/numeric/<net>): the layer is built
// from the net's .caffemodel (weights included), run on the dumped bottom, and its top, bottom
// diff and param diffs compared with Caffe's. Empty file names skip that part.
struct CaffeDump {
  std::string net;
  std::string layer;
  std::vector<int> shape;  // bottom and top
  std::string bottom;      // relative to the net's folder, like the rest
  std::string top;
  std::string top_diff;
  std::string bottom_diff;
  std::vector<std::string> param_diffs;
};

void ExpectNearDump(const std::vector<double>& actual, const std::string& path) {
  const std::vector<float> expected = ReadF32(path);
  ASSERT_EQ(expected.size(), actual.size()) << path;
  double scale = 1e-3;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 2e-5 * scale) << path << " at " << i;
}

void ExpectMatchesCaffe(const CaffeDump& d) {
  SCOPED_TRACE(d.layer);
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/" + d.net);
  NetParameter net;
  {
    std::ifstream in(dir + "/" + d.net + ".caffemodel", std::ios::binary);
    ASSERT_TRUE(net.ParseFromIstream(&in));
  }
  const LayerParameter* found = nullptr;
  for (const LayerParameter& l : net.layer())
    if (l.name() == d.layer) found = &l;
  ASSERT_NE(found, nullptr) << d.layer;
  auto layer = LayerRegistry::Create(*found);
  const std::vector<float> bottom_values = ReadF32(dir + "/" + d.bottom);
  std::vector<double> values(bottom_values.begin(), bottom_values.end());
  auto bottom = MakeBlob(d.shape, values, DataType::kFloat32);
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  ASSERT_EQ(top.shape(), d.shape);
  ExpectNearDump(DataOf(top), dir + "/" + d.top);
  if (d.top_diff.empty()) return;
  const std::vector<float> top_diff = ReadF32(dir + "/" + d.top_diff);
  SetDiffOf(&top, std::vector<double>(top_diff.begin(), top_diff.end()));
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  layer->Backward({&top}, {true}, {bottom.get()});
  ExpectNearDump(DiffOf(*bottom), dir + "/" + d.bottom_diff);
  ASSERT_EQ(layer->blobs().size(), d.param_diffs.size());
  for (size_t p = 0; p < d.param_diffs.size(); ++p)
    ExpectNearDump(DiffOf(*layer->blobs()[p]), dir + "/" + d.param_diffs[p]);
}

TEST(ClipLayer, MatchesHandComputed) {
  // Both ends pass the gradient, as Caffe.
  ExpectValues("type: 'Clip' clip_param { min: -0.5 max: 1 }", {-2, -0.5, 0, 1, 3},
               {-0.5, -0.5, 0, 1, 1}, {0, 1, 1, 1, 0});
}

TEST(ClipLayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'Clip' clip_param { min: -1 max: 1 }");
  auto blob = MakeBlob({4}, {-3, -1, 0.5, 2});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  EXPECT_EQ(DataOf(*blob), (std::vector<double>{-1, -1, 0.5, 1}));
  SetDiffOf(blob.get(), {1, 2, 3, 4});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{0, 2, 3, 0}));
}

TEST(ClipLayer, Errors) {
  ExpectParamError("type: 'Clip'", {2}, "clip_param.min");
  ExpectParamError("type: 'Clip' clip_param { min: 2 max: 1 }", {2}, "clip_param.max");
  // clip_param is required in the schema, so the text parser refuses a half-filled one; a
  // parameter built in code reaches the layer.
  LayerParameter param = ParseLayerParam("name: 'bad' type: 'Clip'");
  param.mutable_clip_param()->set_min(0);
  auto layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{2}), top;
  try {
    layer->SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("clip_param.max"), std::string::npos) << e.what();
  }
}

TEST(ClipLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "clip",
                      {2, 6, 8, 8},
                      "fwd/011_conv_a__top0_conv_a.f32",
                      "fwd/041_clip__top0_clip.f32",
                      "bwd/042_clip_clip_0_split__bottom0_clip.f32",
                      "bwd/041_clip__bottom0_conv_a_conv_a_0_split_5.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
