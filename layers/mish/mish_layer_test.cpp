#include "layers/mish/mish_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(Mish, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
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

TEST(MishLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-20, -2, -1, -0.5, 0, 0.5, 1, 2, 20};
  std::vector<double> y, d;
  for (double v : x) {
    const double t = std::tanh(std::log(1 + std::exp(v)));
    y.push_back(v * t);
    d.push_back(t + v * (1 - t * t) / (1 + std::exp(-v)));
  }
  ExpectValues("type: 'Mish'", x, y, d);
}

TEST(MishLayer, KnownValues) {
  ExpectValues("type: 'Mish'", {-1, 1}, {-0.30340146137410895, 0.8650983882673103}, {});
}

}  // namespace
}  // namespace crema::testing
