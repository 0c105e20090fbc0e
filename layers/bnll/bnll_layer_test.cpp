#include "layers/bnll/bnll_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(BNLL, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-20, 20).Name("wide"));

namespace crema::testing {
namespace {

TEST(BNLLLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-60, -5, -0.5, 0, 0.5, 5, 60};
  std::vector<double> y, d;
  for (double v : x) {
    y.push_back(v > 0 ? v + std::log(1 + std::exp(-v)) : std::log(1 + std::exp(v)));
    d.push_back(std::exp(v) / (1 + std::exp(v)));
  }
  ExpectValues("type: 'BNLL'", x, y, d);
}

TEST(BNLLLayer, InPlaceGradientIsTheSigmoidOfTheInput) {
  auto layer = CreateLayer("type: 'BNLL'");
  auto blob = MakeBlob({3}, {-3, 0, 2});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  SetDiffOf(blob.get(), {1, 1, 1});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  const std::vector<double> dx = DiffOf(*blob);
  EXPECT_NEAR(dx[0], 1 / (1 + std::exp(3.0)), 1e-14);
  EXPECT_NEAR(dx[1], 0.5, 1e-14);
  EXPECT_NEAR(dx[2], 1 / (1 + std::exp(-2.0)), 1e-14);
}

TEST(BNLLLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "bnll",
                      {2, 4, 4, 4},
                      "fwd/013_conv_g__top0_conv_g.f32",
                      "fwd/033_bnll__top0_bnll.f32",
                      "bwd/057_mvn_both__bottom0_bnll.f32",
                      "bwd/033_bnll__bottom0_conv_g_conv_g_0_split_3.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
