#include "layers/swish/swish_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(Swish, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("swish_param { beta: 1.3 }", {{2, 3, 4}}).Range(-4, 4).Eltwise(),
                        LayerCase("swish_param { beta: 0 }", {{3, 5}}).Eltwise(),
                        LayerCase("swish_param { beta: -0.5 }", {{3, 5}}).Eltwise());

namespace crema::testing {
namespace {

TEST(SwishLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-30, -2, -0.5, 0, 0.5, 2, 30};
  for (double beta_text : {1.0, 1.3, 0.0}) {
    const double beta = static_cast<float>(beta_text);  // the proto's float
    std::vector<double> y, d;
    for (double v : x) {
      const double s = 1 / (1 + std::exp(-beta * v));
      y.push_back(v * s);
      d.push_back(s + beta * v * s * (1 - s));
    }
    ExpectValues(StrCat("type: 'Swish' swish_param { beta: ", beta_text, " }"), x, y, d);
  }
}

TEST(SwishLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "swish",
                      {2, 6, 8, 8},
                      "fwd/011_conv_a__top0_conv_a.f32",
                      "fwd/039_swish__top0_swish.f32",
                      "bwd/040_swish_swish_0_split__bottom0_swish.f32",
                      "bwd/039_swish__bottom0_conv_a_conv_a_0_split_4.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
