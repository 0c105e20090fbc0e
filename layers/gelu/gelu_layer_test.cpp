#include "layers/gelu/gelu_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(GELU, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-6, 6).Name("wide"));

namespace crema::testing {
namespace {

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
