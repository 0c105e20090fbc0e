#include "layers/power/power_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
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
