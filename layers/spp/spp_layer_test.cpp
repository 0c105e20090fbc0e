#include "layers/spp/spp_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    SPP, LayerCase("spp_param { pyramid_height: 2 }", {{2, 3, 8, 8}}).Name("max2"),
    LayerCase("spp_param { pyramid_height: 3 pool: AVE }", {{2, 2, 9, 7}}).Name("ave3"),
    LayerCase("spp_param { pyramid_height: 3 pool: MAX }", {{1, 2, 6, 7}}).Name("max3_padded"),
    LayerCase("spp_param { pyramid_height: 1 }", {{2, 3, 5, 4}}).Name("max1"),
    LayerCase("spp_param { pyramid_height: 1 pool: AVE }", {{2, 3, 3, 2}}).Name("ave1"),
    LayerCase("spp_param { pyramid_height: 2 pool: STOCHASTIC }", {{2, 2, 4, 4}})
        .Range(0.1, 1)
        .Phase(TEST)
        .Name("stochastic_test"));

namespace crema {
namespace {

std::unique_ptr<Layer> MakeSpp(const std::string& body, Blob* bottom, Blob* top,
                               DataType dtype = DataType::kFloat64) {
  auto layer = testing::CreateLayer("type: 'SPP' spp_param { " + body + " }", dtype);
  layer->SetUp({bottom}, {top});
  return layer;
}

// Two channels of 4 x 4: 0 .. 15 and 100 .. 115.
std::unique_ptr<Blob> Ramp() {
  std::vector<double> values;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 16; ++i) values.push_back(100 * c + i);
  return testing::MakeBlob({1, 2, 4, 4}, values);
}

TEST(SPPValues, LayoutIsConcatOfFlattenedLevels) {
  for (bool max : {true, false}) {
    auto bottom = Ramp();
    Blob top(DataType::kFloat64);
    auto layer =
        MakeSpp(StrCat("pyramid_height: 3 pool: ", max ? "MAX" : "AVE"), bottom.get(), &top);
    ASSERT_EQ(top.shape(), (std::vector<int>{1, 2 * (1 + 4 + 16)}));
    layer->Forward({bottom.get()}, {&top});
    std::vector<double> expected;
    for (int c = 0; c < 2; ++c) expected.push_back(100 * c + (max ? 15 : 7.5));
    for (int c = 0; c < 2; ++c)
      for (double v :
           max ? std::vector<double>{5, 7, 13, 15} : std::vector<double>{2.5, 4.5, 10.5, 12.5})
        expected.push_back(100 * c + v);
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 16; ++i) expected.push_back(100 * c + i);
    EXPECT_EQ(testing::DataOf(top), expected);
    // Backward: every level's gradient lands on the bottom and the levels add up.
    std::vector<double> ones(top.count(), 1.0);
    testing::SetDiffOf(&top, ones);
    layer->Backward({&top}, {true}, {bottom.get()});
    if (max) {
      // Cell 15 of each plane is the max of levels 0, 1 and 2; cell 5 of levels 1 and 2.
      EXPECT_EQ(bottom->diff_at(15), 3.0);
      EXPECT_EQ(bottom->diff_at(5), 2.0);
      EXPECT_EQ(bottom->diff_at(0), 1.0);
    } else {
      EXPECT_NEAR(bottom->diff_at(0), 1.0 / 16 + 1.0 / 4 + 1.0, 1e-15);
    }
  }
}

TEST(SPPValues, HeightOneKeepsFourAxes) {
  auto bottom = Ramp();
  Blob top(DataType::kFloat64);
  auto layer = MakeSpp("pyramid_height: 1 pool: AVE", bottom.get(), &top);
  ASSERT_EQ(top.shape(), (std::vector<int>{1, 2, 1, 1}));
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{7.5, 107.5}));
}

TEST(SPPValues, ReshapeFollowsTheImageSize) {
  Blob bottom(std::vector<int>{2, 3, 8, 8}, DataType::kFloat64), top(DataType::kFloat64);
  testing::FillUniform(&bottom, -1, 1);
  auto layer = MakeSpp("pyramid_height: 3", &bottom, &top);
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 63}));
  bottom.Reshape({3, 3, 13, 6});
  testing::FillUniform(&bottom, -1, 1);
  layer->Reshape({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{3, 63}));
  layer->Forward({&bottom}, {&top});
  // Level 0 is the global maximum of each plane.
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 3; ++c) {
      double m = -1e9;
      for (int i = 0; i < 78; ++i) m = std::max(m, bottom.data_at((n * 3 + c) * 78 + i));
      EXPECT_EQ(top.data_at(n * 63 + c), m);
    }
}

// SetUp of the layer `text` (named "bad") on bottoms of `shapes` must throw a ConfigError whose
// message names `field` and the layer.
void ExpectSetUpError(const std::string& text, const std::vector<std::vector<int>>& shapes,
                      const std::string& field) {
  SCOPED_TRACE(text);
  LayerParameter param = testing::ParseLayerParam("name: 'bad' " + text);
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom;
  for (const auto& shape : shapes) {
    blobs.push_back(std::make_unique<Blob>(shape));
    bottom.push_back(blobs.back().get());
  }
  Blob top;
  try {
    layer->SetUp(bottom, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << field;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\""), std::string::npos) << e.what();
  }
}

TEST(SPPErrors, Parameters) {
  ExpectSetUpError("type: 'SPP'", {{1, 2, 4, 4}}, "spp_param.pyramid_height");
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 0 }", {{1, 2, 4, 4}},
                   "spp_param.pyramid_height");
  // Level 2 of a 5 x 5 image: kernel 2, pad 2; Caffe's Pooling would abort.
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 3 }", {{1, 2, 5, 5}},
                   "spp_param.pyramid_height");
  ExpectSetUpError("type: 'SPP' spp_param { pyramid_height: 2 }", {{1, 2, 5}}, "4 axes");
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

// The layer called `name` in layer_zoo.caffemodel (parameters and blobs as Caffe saved them).
LayerParameter ZooLayer(const std::string& dir, const std::string& name) {
  NetParameter net;
  std::ifstream in(dir + "/layer_zoo.caffemodel", std::ios::binary);
  EXPECT_TRUE(net.ParseFromIstream(&in)) << dir;
  for (const LayerParameter& layer : net.layer())
    if (layer.name() == name) return layer;
  ADD_FAILURE() << "no layer " << name << " in layer_zoo.caffemodel";
  return LayerParameter();
}

std::unique_ptr<Blob> LoadF32(const std::string& path, const std::vector<int>& shape) {
  const std::vector<float> values = testing::ReadF32(path);
  auto blob = std::make_unique<Blob>(shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), blob->count()) << path;
  if (static_cast<int64_t>(values.size()) == blob->count())
    std::copy(values.begin(), values.end(), blob->mutable_cpu_data<float>());
  return blob;
}

// Caffe's float32 values vs ours, relative to the largest magnitude of the reference.
void ExpectNearRef(const Blob& actual, const std::string& path, bool diff) {
  const std::vector<float> expected = testing::ReadF32(path);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << path;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    if (std::abs(a - expected[i]) <= 2e-5 * std::max(scale, 1e-3)) continue;
    if (++failures <= 5) ADD_FAILURE() << path << " at " << i << ": " << a << " vs " << expected[i];
  }
}

struct ZooCase {
  std::string layer;
  std::vector<std::pair<std::string, std::vector<int>>> bottoms;  // fwd/ or inputs/ files
  std::string top;                                                // fwd/ file of top[0]
  std::string top_diff;                                           // bwd/ file holding top[0]'s diff
  std::vector<std::string> bottom_diffs;  // bwd/ files, one per bottom ("" = not checked)
  std::vector<std::string> param_diffs;   // grad/ files, one per learned blob
};

// Runs one layer of layer_zoo on Caffe's inputs and compares forward, bottom and param diffs.
// Returns the layer so that callers can check more (e.g. BatchNorm's statistics).
std::unique_ptr<Layer> RunZooCase(const std::string& dir, const ZooCase& c) {
  std::unique_ptr<Layer> layer = LayerRegistry::Create(ZooLayer(dir, c.layer));
  std::vector<std::unique_ptr<Blob>> bottoms;
  BlobVec bottom;
  for (const auto& [file, shape] : c.bottoms) {
    bottoms.push_back(LoadF32(dir + "/" + file, shape));
    bottom.push_back(bottoms.back().get());
  }
  Blob top;
  layer->SetUp(bottom, {&top});
  layer->Forward(bottom, {&top});
  ExpectNearRef(top, dir + "/" + c.top, false);
  const std::vector<float> top_diff = testing::ReadF32(dir + "/" + c.top_diff);
  EXPECT_EQ(static_cast<int64_t>(top_diff.size()), top.count()) << c.top_diff;
  if (static_cast<int64_t>(top_diff.size()) != top.count()) return layer;
  std::copy(top_diff.begin(), top_diff.end(), top.mutable_cpu_diff<float>());
  EXPECT_EQ(layer->blobs().size(), c.param_diffs.size());
  for (size_t i = 0; i < layer->blobs().size(); ++i) {
    layer->blobs()[i]->SetDiffZero();
    layer->set_param_propagate_down(static_cast<int>(i), true);
  }
  std::vector<bool> propagate_down;
  for (const std::string& file : c.bottom_diffs) propagate_down.push_back(!file.empty());
  layer->Backward({&top}, propagate_down, bottom);
  for (size_t i = 0; i < c.bottom_diffs.size(); ++i)
    if (!c.bottom_diffs[i].empty()) ExpectNearRef(*bottom[i], dir + "/" + c.bottom_diffs[i], true);
  for (size_t i = 0; i < c.param_diffs.size() && i < layer->blobs().size(); ++i)
    ExpectNearRef(*layer->blobs()[i], dir + "/" + c.param_diffs[i], true);
  return layer;
}

TEST(SPPCaffe, Max) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"spp",
                          {{"fwd/071_eltwise_max__top0_eltwise_max.f32", {2, 6, 8, 8}}},
                          "fwd/083_spp__top0_spp.f32",
                          "bwd/122_head_concat__bottom1_spp.f32",
                          {"bwd/083_spp__bottom0_eltwise_max_eltwise_max_0_split_1.f32"},
                          {}});
}

TEST(SPPCaffe, Ave) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"spp_ave",
                          {{"fwd/061_scale_by_blob__top0_scale_by_blob.f32", {2, 4, 4, 4}}},
                          "fwd/084_spp_ave__top0_spp_ave.f32",
                          "bwd/122_head_concat__bottom3_spp_ave.f32",
                          {"bwd/084_spp_ave__bottom0_scale_by_blob.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
