#include "layers/sigmoid/sigmoid_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(Sigmoid, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-8, 8).Name("wide"));

namespace crema::testing {
namespace {

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
