#include "layers/lstm_unit/lstm_unit_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    LSTMUnit, LayerCase("", {{1, 3, 4}, {1, 3, 16}, {1, 3}}).Integer(2, 2).Range(-2, 2).Tops(2),
    LayerCase("", {{1, 5, 2}, {1, 5, 8}, {1, 5}}).Integer(2, 2).Tops(2).Name("five_streams"),
    LayerCase("", {{1, 2, 3}, {1, 2, 12}, {1, 2}}).Integer(2, 1).Tops(2).Name("all_reset"),
    LayerCase("", {{1, 3, 2}, {1, 3, 8}, {1, 3}})
        .Integer(2, 2)
        .NoGradient(0)
        .Tops(2)
        .Name("gates_only"),
    LayerCase("", {{1, 3, 2}, {1, 3, 8}, {1, 3}})
        .Integer(2, 2)
        .NoGradient(1)
        .Tops(2)
        .Name("c_prev_only"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

double Sig(double x) { return 1 / (1 + std::exp(-x)); }

TEST(LSTMUnitValues, MatchNaiveReference) {
  const int N = 2, D = 3;
  Blob c64({1, N, D}, DataType::kFloat64), x64({1, N, 4 * D}, DataType::kFloat64);
  testing::FillUniform(&c64, -1, 1, 3);
  testing::FillUniform(&x64, -2, 2, 4);
  const std::vector<double> c_prev = testing::DataOf(c64), x = testing::DataOf(x64);
  const std::vector<double> cont = {0, 1};
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    auto layer = CreateLayer("type: 'LSTMUnit'", dtype);
    auto bc = MakeBlob({1, N, D}, c_prev, dtype);
    auto bx = MakeBlob({1, N, 4 * D}, x, dtype);
    auto bcont = MakeBlob({1, N}, cont, dtype);
    Blob c, h;
    layer->SetUp({bc.get(), bx.get(), bcont.get()}, {&c, &h});
    layer->Forward({bc.get(), bx.get(), bcont.get()}, {&c, &h});
    const double tol = dtype == DataType::kFloat64 ? 1e-12 : 1e-6;
    std::vector<double> dc(N * D), dh(N * D);
    for (int i = 0; i < N * D; ++i) {
      dc[i] = 0.1 * (i + 1);
      dh[i] = 0.3 - 0.1 * i;
    }
    testing::SetDiffOf(&c, dc);
    testing::SetDiffOf(&h, dh);
    layer->Backward({&c, &h}, {true, true, false}, {bc.get(), bx.get(), bcont.get()});
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const double* g = &x[n * 4 * D];
        const double i = Sig(g[d]), f = cont[n] * Sig(g[D + d]), o = Sig(g[2 * D + d]),
                     gg = std::tanh(g[3 * D + d]);
        const int at = n * D + d;
        const double cell = f * c_prev[at] + i * gg;
        EXPECT_NEAR(c.data_at(at), cell, tol);
        EXPECT_NEAR(h.data_at(at), o * std::tanh(cell), tol);
        // Backward by the chain rule.
        const double dcell = dc[at] + dh[at] * o * (1 - std::tanh(cell) * std::tanh(cell));
        EXPECT_NEAR(bc->diff_at(at), dcell * f, tol);
        EXPECT_NEAR(bx->diff_at(n * 4 * D + d), dcell * gg * i * (1 - i), tol);
        EXPECT_NEAR(bx->diff_at(n * 4 * D + D + d), dcell * c_prev[at] * f * (1 - f), tol);
        EXPECT_NEAR(bx->diff_at(n * 4 * D + 2 * D + d), dh[at] * std::tanh(cell) * o * (1 - o),
                    tol);
        EXPECT_NEAR(bx->diff_at(n * 4 * D + 3 * D + d), dcell * i * (1 - gg * gg), tol);
      }
  }
}

TEST(LSTMUnitErrors, ShapesAndContGradient) {
  Blob c, h;
  auto expect_config = [&](std::vector<int> sc, std::vector<int> sx, std::vector<int> scont,
                           const char* needle) {
    auto layer = CreateLayer("type: 'LSTMUnit'");
    auto bc = MakeBlob(sc, {}), bx = MakeBlob(sx, {}), bcont = MakeBlob(scont, {});
    try {
      layer->SetUp({bc.get(), bx.get(), bcont.get()}, {&c, &h});
      ADD_FAILURE() << "expected a ConfigError: " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config({2, 3, 4}, {2, 3, 16}, {2, 3}, "bottom[0] (c_prev) must be 1 x N x D");
  expect_config({1, 3, 4}, {1, 3, 12}, {1, 3}, "must be 1 x 3 x 16");
  expect_config({1, 3, 4}, {1, 3, 16}, {1, 2}, "bottom[2] (cont) must be 1 x 3");
  expect_config({1, 3, 4}, {1, 3, 16}, {1, 3, 1}, "bottom[2] (cont) must be 1 x 3");

  auto layer = CreateLayer("type: 'LSTMUnit'");
  auto bc = MakeBlob({1, 1, 1}, {0}), bx = MakeBlob({1, 1, 4}, {}), bcont = MakeBlob({1, 1}, {1});
  layer->SetUp({bc.get(), bx.get(), bcont.get()}, {&c, &h});
  layer->Forward({bc.get(), bx.get(), bcont.get()}, {&c, &h});
  EXPECT_THROW(layer->Backward({&c, &h}, {true, true, true}, {bc.get(), bx.get(), bcont.get()}),
               ConfigError);
  EXPECT_FALSE(layer->AllowForceBackward(2));
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(LSTMUnitCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "lstm_unit",
                {{"fwd/094_lstm_last__top1_lstm_last.f32", {1, 2, 5}},
                 {"fwd/101_gates_3d__top0_gates_3d.f32", {1, 2, 20}},
                 {"fwd/099_cont_slice__top1_cont_last.f32", {1, 2}}},
                {"fwd/102_lstm_unit__top0_lu_c.f32", "fwd/102_lstm_unit__top1_lu_h.f32"},
                {"bwd/103_side_f14__bottom0_lu_c.f32", "bwd/104_side_f15__bottom0_lu_h.f32"},
                {"bwd/102_lstm_unit__bottom0_lstm_last_lstm_last_1_split_1.f32",
                 "bwd/102_lstm_unit__bottom1_gates_3d.f32", ""},
                {});
}

}  // namespace
}  // namespace crema
