#include "layers/hard_swish/hard_swish_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(HardSwish, LayerCase("", {{2, 3, 4, 5}}).Range(-5, 0).Kink(-3.0).Eltwise(),
                        LayerCase("", {{3, 5}}).Range(0, 5).Kink(3.0).Eltwise().Name("top_kink"));

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

TEST(HardSwishLayer, MatchesHandComputed) {
  // Derivative as PyTorch: 0 below -3, x / 3 + 0.5 on [-3, 3], 1 above.
  ExpectValues("type: 'HardSwish'", {-4, -3, -1.5, 0, 1.5, 3, 4}, {0, 0, -0.375, 0, 1.125, 3, 4},
               {0, -0.5, 0, 0.5, 1, 1.5, 1});
}

TEST(HardSwishLayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'HardSwish'");
  auto blob = MakeBlob({3}, {-4, 1.5, 4});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  EXPECT_EQ(DataOf(*blob), (std::vector<double>{0, 1.125, 4}));
  SetDiffOf(blob.get(), {1, 2, 3});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{0, 2, 3}));
}

}  // namespace
}  // namespace crema::testing
