#include "layers/mish/mish_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(Mish, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-8, 8).Name("wide"));

namespace crema::testing {
namespace {

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
