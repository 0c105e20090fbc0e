#include "layers/tanh/tanh_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(TanH, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-4, 4).Name("wide"));

namespace crema::testing {
namespace {

TEST(TanHLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-30, -2, -0.5, 0, 0.5, 2, 30};
  std::vector<double> y, d;
  for (double v : x) {
    const double t = (std::exp(v) - std::exp(-v)) / (std::exp(v) + std::exp(-v));
    y.push_back(t);
    d.push_back(1 - t * t);
  }
  ExpectValues("type: 'TanH'", x, y, d);
}

TEST(TanHLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "tanh",
                      {2, 6, 8, 8},
                      "fwd/011_conv_a__top0_conv_a.f32",
                      "fwd/030_tanh__top0_tanh.f32",
                      "bwd/031_tanh_tanh_0_split__bottom0_tanh.f32",
                      "bwd/030_tanh__bottom0_conv_a_conv_a_0_split_3.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
