#include "layers/absval/absval_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(AbsVal, LayerCase("", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
                        LayerCase("", {{7}}).Range(-3, 3).Kink(0.0));

namespace crema::testing {
namespace {

TEST(AbsValLayer, MatchesHandComputed) {
  ExpectValues("type: 'AbsVal'", {-2, -0.5, 0, 0.5, 3}, {2, 0.5, 0, 0.5, 3}, {-1, -1, 0, 1, 1});
}

TEST(AbsValLayer, RefusesInPlace) {
  auto layer = CreateLayer("name: 'bad' type: 'AbsVal'");
  EXPECT_FALSE(layer->AllowsInPlace());
  Blob blob(std::vector<int>{3}, DataType::kFloat64);
  try {
    layer->SetUp({&blob}, {&blob});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("in-place"), std::string::npos) << e.what();
  }
}

TEST(AbsValLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "absval",
                      {2, 3, 4, 7},
                      "fwd/015_conv_rect__top0_conv_rect.f32",
                      "fwd/032_absval__top0_absval.f32",
                      "bwd/088_reduce_sum_all__bottom0_absval.f32",
                      "bwd/032_absval__bottom0_conv_rect_conv_rect_0_split_1.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
