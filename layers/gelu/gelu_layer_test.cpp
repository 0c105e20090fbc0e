#include "layers/gelu/gelu_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(GELU, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-6, 6).Name("wide"));

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

TEST(GELULayer, MatchesNaiveReference) {
  const std::vector<double> x = {-8, -2, -1, -0.5, 0, 0.5, 1, 2, 8};
  std::vector<double> y, d;
  const double pi = std::acos(-1.0);
  for (double v : x) {
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    y.push_back(v * cdf);
    d.push_back(cdf + v * std::exp(-v * v / 2) / std::sqrt(2 * pi));
  }
  ExpectValues("type: 'GELU'", x, y, d);
}

TEST(GELULayer, KnownValues) {
  // PyTorch's torch.nn.functional.gelu (approximate='none').
  ExpectValues("type: 'GELU'", {-1, 1, 2},
               {-0.15865525393145707, 0.8413447460685429, 1.9544997361036416}, {});
}

}  // namespace
}  // namespace crema::testing
