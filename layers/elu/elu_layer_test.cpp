#include "layers/elu/elu_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(ELU, LayerCase("", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
                        LayerCase("elu_param { alpha: 0.7 }", {{2, 3, 4}}).Kink(0.0).Eltwise(),
                        LayerCase("elu_param { alpha: 2.5 }", {{3, 5}}).Range(-4, 2).Kink(0.0));

namespace crema::testing {
namespace {

TEST(ELULayer, MatchesNaiveReference) {
  const std::vector<double> x = {-20, -2, -0.5, 0, 0.5, 3};
  for (double alpha_text : {1.0, 0.7}) {
    const double alpha = static_cast<float>(alpha_text);  // the proto's float
    std::vector<double> y, d;
    for (double v : x) {
      y.push_back(v > 0 ? v : alpha * (std::exp(v) - 1));
      d.push_back(v > 0 ? 1 : alpha * std::exp(v));  // alpha at 0, as Caffe
    }
    ExpectValues(StrCat("type: 'ELU' elu_param { alpha: ", alpha_text, " }"), x, y, d);
  }
}

TEST(ELULayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "elu",
                      {2, 4, 4, 4},
                      "fwd/013_conv_g__top0_conv_g.f32",
                      "fwd/027_elu__top0_elu.f32",
                      "bwd/063_bias_by_blob__bottom0_elu.f32",
                      "bwd/027_elu__bottom0_conv_g_conv_g_0_split_2.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
