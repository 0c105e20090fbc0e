#include "layers/power/power_layer.hpp"

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
    Power, LayerCase("", {{2, 3, 4, 5}}).Eltwise().Name("identity"),
    LayerCase("power_param { power: 1.5 scale: 0.8 shift: 0.1 }", {{2, 3, 4}})
        .Range(0.1, 1)
        .Eltwise(),
    LayerCase("power_param { power: 2 scale: -1.3 shift: 0.5 }", {{2, 3, 4}}).Eltwise(),
    LayerCase("power_param { power: 1 scale: 2 shift: 3 }", {{6, 4}}).Eltwise(),
    LayerCase("power_param { power: 3 }", {{6, 4}}).Eltwise().Name("cube"),
    LayerCase("power_param { power: -1 shift: 2 }", {{6, 4}}).Eltwise().Name("inverse"),
    LayerCase("power_param { power: 0 scale: 2 shift: 3 }", {{6, 4}}).Eltwise().Name("power0"),
    LayerCase("power_param { power: 2 scale: 0 shift: 3 }", {{6, 4}}).Eltwise().Name("scale0"));

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

TEST(PowerLayer, MatchesNaiveReference) {
  const std::vector<double> x = {0.05, 0.3, 1, 2.5};
  struct Mode {
    float power, scale, shift;  // the proto's types
  };
  for (const Mode& m : {Mode{1.5, 0.8, 0.1}, Mode{2, -1.3, 0.5}, Mode{1, 2, 3}, Mode{3, 1, 0},
                        Mode{-1, 1, 2}, Mode{0.5, 2, 0}, Mode{0, 2, 3}, Mode{2, 0, 3}}) {
    std::vector<double> y, d;
    for (double v : x) {
      const double base = double{m.shift} + double{m.scale} * v;
      y.push_back(m.power * m.scale == 0 ? (m.power == 0 ? 1 : std::pow(double{m.shift}, m.power))
                                         : std::pow(base, double{m.power}));
      d.push_back(m.power * m.scale == 0
                      ? 0
                      : double{m.power} * m.scale * std::pow(base, double{m.power} - 1));
    }
    ExpectValues(StrCat("type: 'Power' power_param { power: ", m.power, " scale: ", m.scale,
                        " shift: ", m.shift, " }"),
                 x, y, d);
  }
}

// Caffe divides y by x, which is 0/0 at x = 0; crema gives the true derivative.
TEST(PowerLayer, GradientAtZeroBaseIsFinite) {
  ExpectValues("type: 'Power' power_param { power: 2.5 }", {0, 1}, {0, 1}, {0, 2.5});
}

TEST(PowerLayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'Power' power_param { power: 3 scale: 2 shift: 1 }");
  auto blob = MakeBlob({2}, {0.5, -1});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  EXPECT_EQ(DataOf(*blob), (std::vector<double>{8, -1}));
  SetDiffOf(blob.get(), {1, 1});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{24, 6}));  // 3 * 2 * (1 + 2x)^2
}

TEST(PowerLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "power",
                      {2, 6, 8, 8},
                      "fwd/028_sigmoid__top0_sigmoid.f32",
                      "fwd/034_power__top0_power.f32",
                      "bwd/066_concat0__bottom1_power.f32",
                      "bwd/034_power__bottom0_sigmoid_sigmoid_0_split_0.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
