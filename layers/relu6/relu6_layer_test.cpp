#include "layers/relu6/relu6_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(ReLU6, LayerCase("", {{2, 3, 4, 5}}).Range(-2, 3).Kink(0.0).Eltwise(),
                        LayerCase("", {{3, 5}}).Range(3, 8).Kink(6.0).Eltwise().Name("top_kink"));

namespace crema::testing {
namespace {

TEST(ReLU6Layer, MatchesHandComputed) {
  // Both kinks take the zero side: derivative 0 at x = 0 (as ReLU) and at x = 6.
  ExpectValues("type: 'ReLU6'", {-2, 0, 0.5, 5.5, 6, 9}, {0, 0, 0.5, 5.5, 6, 6},
               {0, 0, 1, 1, 0, 0});
}

TEST(ReLU6Layer, InPlaceGradient) {
  auto layer = CreateLayer("type: 'ReLU6'");
  auto blob = MakeBlob({3}, {-1, 3, 7});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  SetDiffOf(blob.get(), {1, 2, 3});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{0, 2, 0}));
}

}  // namespace
}  // namespace crema::testing
