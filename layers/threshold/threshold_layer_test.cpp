#include "layers/threshold/threshold_layer.hpp"

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
    Threshold, LayerCase("", {{2, 3, 4, 5}}).NoGradient(0).NoGradientCheck(),
    LayerCase("threshold_param { threshold: 0.2 }", {{3, 5}}).NoGradient(0).NoGradientCheck());

namespace crema::testing {
namespace {

TEST(ThresholdLayer, MatchesHandComputed) {
  ExpectValues("type: 'Threshold'", {-1, 0, 1e-7, 2}, {0, 0, 1, 1}, {});
  ExpectValues("type: 'Threshold' threshold_param { threshold: 0.5 }", {0.4, 0.5, 0.6, -3},
               {0, 0, 1, 0}, {});
}

TEST(ThresholdLayer, HasNoGradient) {
  auto layer = CreateLayer("name: 'bad' type: 'Threshold'");
  EXPECT_FALSE(layer->AllowForceBackward(0));
  auto bottom = MakeBlob({2}, {-1, 1});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, {1, 1});
  EXPECT_NO_THROW(layer->Backward({&top}, {false}, {bottom.get()}));
  try {
    layer->Backward({&top}, {true}, {bottom.get()});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\""), std::string::npos) << e.what();
  }
}

TEST(ThresholdLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo_aux",
                      "threshold",
                      {3, 5},
                      "fwd/008_ip_s__top0_scores.f32",
                      "fwd/016_threshold__top0_threshold.f32",
                      "",
                      "",
                      {}});
}

}  // namespace
}  // namespace crema::testing
