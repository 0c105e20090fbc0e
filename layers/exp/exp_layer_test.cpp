#include "layers/exp/exp_layer.hpp"

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
    Exp, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
    LayerCase("exp_param { base: 2 scale: 0.5 shift: 0.1 }", {{2, 3, 4}}).Eltwise(),
    LayerCase("exp_param { base: 10 scale: -1.5 }", {{3, 5}}).Eltwise(),
    LayerCase("exp_param { scale: 0.3 shift: -2 }", {{3, 5}}).Eltwise(),
    LayerCase("exp_param { base: 1 scale: 2 shift: 1 }", {{3, 5}}).Eltwise());

namespace crema::testing {
namespace {

TEST(ExpLayer, MatchesNaiveReference) {
  const std::vector<double> x = {-3, -0.5, 0, 0.5, 2};
  struct Mode {
    float base, scale, shift;  // the proto's types
  };
  for (const Mode& m :
       {Mode{-1, 1, 0}, Mode{2, 0.5, 0.1}, Mode{10, -1.5, 0}, Mode{-1, 0.3, -2}, Mode{1, 2, 1}}) {
    std::vector<double> y, d;
    const double base = m.base == -1 ? std::exp(1.0) : double{m.base};
    for (double v : x) {
      y.push_back(std::pow(base, double{m.shift} + double{m.scale} * v));
      d.push_back(y.back() * m.scale * std::log(base));
    }
    ExpectValues(StrCat("type: 'Exp' exp_param { base: ", m.base, " scale: ", m.scale,
                        " shift: ", m.shift, " }"),
                 x, y, d);
  }
}

TEST(ExpLayer, Errors) {
  ExpectParamError("type: 'Exp' exp_param { base: 0 }", {2}, "exp_param.base");
  ExpectParamError("type: 'Exp' exp_param { base: -2 }", {2}, "exp_param.base");
}

TEST(ExpLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "exp",
                      {2, 6, 8, 8},
                      "fwd/030_tanh__top0_tanh.f32",
                      "fwd/035_exp__top0_exp.f32",
                      "bwd/073_eltwise_sum_plain__bottom0_exp.f32",
                      "bwd/035_exp__bottom0_tanh_tanh_0_split_0.f32",
                      {}});
}

TEST(ExpLayer, BaseEMatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "exp_e",
                      {2, 6, 8, 8},
                      "fwd/030_tanh__top0_tanh.f32",
                      "fwd/036_exp_e__top0_exp_e.f32",
                      "bwd/038_log_e__bottom0_exp_e.f32",
                      "bwd/036_exp_e__bottom0_tanh_tanh_0_split_1.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
