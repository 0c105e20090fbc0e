#include "layers/sigmoid/sigmoid_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(Sigmoid, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-8, 8).Name("wide"));

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

TEST(SigmoidLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-30, -2, -0.5, 0, 0.5, 2, 30};
  std::vector<double> y, d;
  for (double v : x) {
    const double s = 1 / (1 + std::exp(-v));
    y.push_back(s);
    d.push_back(s * (1 - s));
  }
  ExpectValues("type: 'Sigmoid'", x, y, d);
}

TEST(SigmoidLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "sigmoid",
                      {2, 6, 8, 8},
                      "fwd/011_conv_a__top0_conv_a.f32",
                      "fwd/028_sigmoid__top0_sigmoid.f32",
                      "bwd/029_sigmoid_sigmoid_0_split__bottom0_sigmoid.f32",
                      "bwd/028_sigmoid__bottom0_conv_a_conv_a_0_split_2.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
