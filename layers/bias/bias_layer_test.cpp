#include "layers/bias/bias_layer.hpp"

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
    Bias,
    LayerCase("bias_param { filler { type: 'gaussian' std: 1 } }", {{2, 3, 4, 5}}).Name("learned"),
    LayerCase("bias_param { axis: 1 num_axes: -1 filler { type: 'uniform' } }", {{2, 3, 4}})
        .Name("learned_to_end"),
    LayerCase("bias_param { axis: -2 num_axes: 2 filler { type: 'uniform' } }", {{2, 3, 4, 2}})
        .Name("learned_negative_axis"),
    LayerCase("bias_param { num_axes: 0 filler { type: 'constant' value: 0.7 } }", {{2, 3}})
        .Name("learned_scalar"),
    LayerCase("bias_param { axis: 0 num_axes: 1 filler { type: 'uniform' } }", {{3, 2, 2}})
        .Name("learned_axis0"),
    LayerCase("", {{2, 3, 4, 5}, {3, 4}}).Name("bottom1"),
    LayerCase("bias_param { axis: 0 }", {{2, 3, 4}, {2}}).Name("bottom1_axis0"),
    LayerCase("bias_param { axis: 2 }", {{2, 3, 4}, {4}}).Name("bottom1_last_axis"),
    LayerCase("", {{2, 3}, {}}).Name("bottom1_scalar"));

namespace crema {
namespace {

using testing::FillUniform;

// top[o, d, i] = x[o, d, i] + b[d].
TEST(BiasValues, ForwardAndBackwardByDefinition) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tol = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
    auto layer = testing::CreateLayer(
        "type: 'Bias' bias_param { axis: 1 num_axes: 2 filler { type: 'gaussian' } }", dtype);
    Blob bottom(std::vector<int>{2, 3, 2, 4}, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer->SetUp({&bottom}, {&top});
    const Blob& b = *layer->blobs()[0];
    ASSERT_EQ(b.shape(), (std::vector<int>{3, 2}));
    layer->Forward({&bottom}, {&top});
    for (int64_t k = 0; k < top.count(); ++k)
      EXPECT_NEAR(top.data_at(k), bottom.data_at(k) + b.data_at(k / 4 % 6), tol) << k;
    for (int64_t k = 0; k < top.count(); ++k)
      CREMA_DISPATCH_FLOAT(dtype, T, top.mutable_cpu_diff<T>()[k] = static_cast<T>(0.01 * k));
    layer->blobs()[0]->SetDiffZero();
    for (int pass = 1; pass <= 2; ++pass) {
      layer->Backward({&top}, {true}, {&bottom});
      for (int d = 0; d < 6; ++d) {
        double sum = 0;
        for (int o = 0; o < 2; ++o)
          for (int i = 0; i < 4; ++i) sum += 0.01 * ((o * 6 + d) * 4 + i);
        // Learned diffs accumulate.
        EXPECT_NEAR(b.diff_at(d), pass * sum, tol) << d;
      }
    }
    for (int64_t k = 0; k < top.count(); ++k) EXPECT_NEAR(bottom.diff_at(k), 0.01 * k, tol);
  }
}

TEST(BiasValues, SecondBottomDiffIsWritten) {
  auto layer = testing::CreateLayer("type: 'Bias' bias_param { axis: 0 }");
  auto x = testing::MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = testing::MakeBlob({2}, {10, -10});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get(), b.get()}, {&top});
  EXPECT_TRUE(layer->blobs().empty());
  layer->Forward({x.get(), b.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{11, 12, 13, -6, -5, -4}));
  testing::SetDiffOf(&top, {1, 2, 3, 4, 5, 6});
  testing::SetDiffOf(b.get(), {100, 100});
  layer->Backward({&top}, {false, true}, {x.get(), b.get()});
  EXPECT_EQ(testing::DiffOf(*b), (std::vector<double>{6, 15}));
}

TEST(BiasValues, LoadedBlobIsUsed) {
  auto layer = testing::CreateLayer(
      "type: 'Bias' blobs { shape { dim: 2 } data: 1 data: 2 } bias_param { filler { type: "
      "'constant' value: 9 } }");
  auto x = testing::MakeBlob({1, 2, 1}, {0, 0});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get()}, {&top});
  EXPECT_EQ(layer->blobs()[0]->dtype(), DataType::kFloat64);
  layer->Forward({x.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{1, 2}));
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

TEST(BiasErrors, Parameters) {
  ExpectSetUpError("type: 'Bias' bias_param { axis: 4 }", {{2, 3, 4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { axis: -4 }", {{2, 3, 4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { num_axes: -2 }", {{2, 3, 4}}, "bias_param.num_axes");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 1 num_axes: 3 }", {{2, 3, 4}},
                   "bias_param.num_axes");
  ExpectSetUpError("type: 'Bias' bias_param { filler { type: 'nonsense' } }", {{2, 3}},
                   "bias_param.filler");
  ExpectSetUpError("type: 'Bias' blobs { shape { dim: 4 } }", {{2, 3}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' blobs { shape { dim: 3 } } blobs { shape { dim: 3 } }", {{2, 3}},
                   "blobs");
}

TEST(BiasErrors, Shapes) {
  ExpectSetUpError("type: 'Bias'", {{2, 3, 4}, {4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 2 }", {{2, 3, 4}, {4, 1}}, "extends past");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 5 }", {{2, 3, 4}, {4}}, "bias_param.axis");
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

TEST(BiasCaffe, LearnedBias) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"bias_param",
                          {{"fwd/058_scale_bias__top0_scale_bias.f32", {2, 6, 8, 8}}},
                          "fwd/062_bias_param__top0_bias_param.f32",
                          "bwd/065_concat__bottom0_bias_param.f32",
                          {"bwd/062_bias_param__bottom0_scale_bias.f32"},
                          {"grad/062_bias_param__param0.f32"}});
}

TEST(BiasCaffe, BiasFromSecondBottom) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"bias_by_blob",
                          {{"fwd/027_elu__top0_elu.f32", {2, 4, 4, 4}},
                           {"fwd/059_gmax_flat__top0_gmax_flat.f32", {2, 4}}},
                          "fwd/063_bias_by_blob__top0_bias_by_blob.f32",
                          "bwd/113_side_f9__bottom0_bias_by_blob.f32",
                          {"bwd/063_bias_by_blob__bottom0_elu.f32",
                           "bwd/063_bias_by_blob__bottom1_gmax_flat_gmax_flat_0_split_1.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
