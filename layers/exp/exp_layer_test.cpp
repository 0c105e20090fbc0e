#include "layers/exp/exp_layer.hpp"

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
    Exp, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
    LayerCase("exp_param { base: 2 scale: 0.5 shift: 0.1 }", {{2, 3, 4}}).Eltwise(),
    LayerCase("exp_param { base: 10 scale: -1.5 }", {{3, 5}}).Eltwise(),
    LayerCase("exp_param { scale: 0.3 shift: -2 }", {{3, 5}}).Eltwise(),
    LayerCase("exp_param { base: 1 scale: 2 shift: 1 }", {{3, 5}}).Eltwise());

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

TEST(ExpLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-3, -0.5, 0, 0.5, 2};
  struct Mode {
    float base, scale, shift;  // the proto's types
  };
  for (const Mode& m :
       {Mode{-1, 1, 0}, Mode{2, 0.5, 0.1}, Mode{10, -1.5, 0}, Mode{-1, 0.3, -2}, Mode{1, 2, 1}}) {
    std::vector<double> y, d;
    const double base = m.base == -1 ? std::exp(1.0) : double{m.base};
    for (double v : x) {
      y.push_back(std::pow(base, double{m.shift} + double{m.scale} * v));
      d.push_back(y.back() * m.scale * std::log(base));
    }
    ExpectValues(StrCat("type: 'Exp' exp_param { base: ", m.base, " scale: ", m.scale,
                        " shift: ", m.shift, " }"),
                 x, y, d);
  }
}

TEST(ExpLayer, Errors) {
  ExpectParamError("type: 'Exp' exp_param { base: 0 }", {2}, "exp_param.base");
  ExpectParamError("type: 'Exp' exp_param { base: -2 }", {2}, "exp_param.base");
}

TEST(ExpLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "exp",
                      {2, 6, 8, 8},
                      "fwd/030_tanh__top0_tanh.f32",
                      "fwd/035_exp__top0_exp.f32",
                      "bwd/073_eltwise_sum_plain__bottom0_exp.f32",
                      "bwd/035_exp__bottom0_tanh_tanh_0_split_0.f32",
                      {}});
}

TEST(ExpLayer, BaseEMatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "exp_e",
                      {2, 6, 8, 8},
                      "fwd/030_tanh__top0_tanh.f32",
                      "fwd/036_exp_e__top0_exp_e.f32",
                      "bwd/038_log_e__bottom0_exp_e.f32",
                      "bwd/036_exp_e__bottom0_tanh_tanh_0_split_1.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
