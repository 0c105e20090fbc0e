#include "layers/log/log_layer.hpp"

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
    Log, LayerCase("", {{2, 3, 4, 5}}).Range(0.1, 2).Eltwise(),
    LayerCase("log_param { base: 2 scale: 0.9 shift: 0.6 }", {{2, 3, 4}}).Range(0.1, 1).Eltwise(),
    LayerCase("log_param { base: 0.5 scale: -2 shift: 3 }", {{3, 5}}).Eltwise(),
    LayerCase("log_param { shift: 1.5 }", {{3, 5}}).Eltwise());

namespace crema::testing {
namespace {

TEST(LogLayer, MatchesNaiveReference) {
  const std::vector<double> x = {0.05, 0.5, 1, 2, 7};
  struct Mode {
    float base, scale, shift;  // the proto's types
  };
  for (const Mode& m : {Mode{-1, 1, 0}, Mode{2, 0.9, 0.6}, Mode{0.5, -0.1, 1}, Mode{10, 3, 0}}) {
    std::vector<double> y, d;
    const double base = m.base == -1 ? std::exp(1.0) : double{m.base};
    for (double v : x) {
      const double inner = double{m.shift} + double{m.scale} * v;
      y.push_back(std::log(inner) / std::log(base));
      d.push_back(m.scale / (inner * std::log(base)));
    }
    ExpectValues(StrCat("type: 'Log' log_param { base: ", m.base, " scale: ", m.scale,
                        " shift: ", m.shift, " }"),
                 x, y, d);
  }
}

TEST(LogLayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'Log' log_param { base: 2 scale: 2 }");
  auto blob = MakeBlob({2}, {0.5, 4});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  const std::vector<double> y = DataOf(*blob);
  EXPECT_NEAR(y[0], 0, 1e-14);
  EXPECT_NEAR(y[1], 3, 1e-14);
  SetDiffOf(blob.get(), {1, 1});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  const std::vector<double> dx = DiffOf(*blob);
  EXPECT_NEAR(dx[0], 2 / std::log(2.0), 1e-14);  // 2 / (2x ln 2)
  EXPECT_NEAR(dx[1], 0.25 / std::log(2.0), 1e-14);
}

TEST(LogLayer, Errors) {
  ExpectParamError("type: 'Log' log_param { base: 0 }", {2}, "log_param.base");
  ExpectParamError("type: 'Log' log_param { base: -3 }", {2}, "log_param.base");
  ExpectParamError("type: 'Log' log_param { base: 1 }", {2}, "log_param.base");
}

TEST(LogLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "log",
                      {2, 6, 8, 8},
                      "fwd/028_sigmoid__top0_sigmoid.f32",
                      "fwd/037_log__top0_log.f32",
                      "bwd/071_eltwise_max__bottom2_log.f32",
                      "bwd/037_log__bottom0_sigmoid_sigmoid_0_split_1.f32",
                      {}});
}

TEST(LogLayer, BaseEMatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "log_e",
                      {2, 6, 8, 8},
                      "fwd/036_exp_e__top0_exp_e.f32",
                      "fwd/038_log_e__top0_log_e.f32",
                      "bwd/073_eltwise_sum_plain__bottom1_log_e.f32",
                      "bwd/038_log_e__bottom0_exp_e.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
