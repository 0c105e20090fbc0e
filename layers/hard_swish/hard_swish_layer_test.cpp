#include "layers/hard_swish/hard_swish_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(HardSwish, LayerCase("", {{2, 3, 4, 5}}).Range(-5, 0).Kink(-3.0).Eltwise(),
                        LayerCase("", {{3, 5}}).Range(0, 5).Kink(3.0).Eltwise().Name("top_kink"));

namespace crema::testing {
namespace {

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
