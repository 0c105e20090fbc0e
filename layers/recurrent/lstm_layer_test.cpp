#include "layers/recurrent/lstm_layer.hpp"

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

#define CREMA_LSTM_PARAM(n, extra)                         \
  "recurrent_param { num_output: " #n                      \
  " weight_filler { type: 'uniform' min: -0.5 max: 0.5 } " \
  "bias_filler { type: 'gaussian' std: 0.2 } " extra " }"

// The sequence indicators are fixed: every pattern has a 0 in the middle of a sequence. Without
// expose_hidden the state carries over between Forward calls, so the cases the gradient checks
// run (Forward many times) start with cont = 0; the "carried" cases start with cont = 1 and
// compare the second of two Forwards (state carried from the first; no gradient check).
CREMA_LAYER_CONFORMANCE(LSTM,
                        LayerCase(CREMA_LSTM_PARAM(3, ""), {{3, 2, 4}, {3, 2}})
                            .Values(1, {0, 0, 1, 0, 1, 1})
                            .NoGradient(1),
                        LayerCase(CREMA_LSTM_PARAM(2, ""), {{3, 2, 2, 2}, {3, 2}, {2, 3}})
                            .Values(1, {0, 0, 1, 1, 0, 1})
                            .NoGradient(1)
                            .Name("static"),
                        LayerCase(CREMA_LSTM_PARAM(2, ""), {{3, 2, 2, 2}, {3, 2}, {2, 3}})
                            .Values(1, {0, 0, 0, 1, 1, 1})
                            .NoGradient(1)
                            .NoGradient(0)
                            .Name("static_gradient_only"),
                        LayerCase(CREMA_LSTM_PARAM(3, "expose_hidden: true"),
                                  {{4, 2, 3}, {4, 2}, {1, 2, 3}, {1, 2, 3}})
                            .Values(1, {1, 0, 1, 1, 0, 1, 1, 1})
                            .NoGradient(1)
                            .Tops(3)
                            .Name("exposed"),
                        LayerCase(CREMA_LSTM_PARAM(3, "expose_hidden: true"),
                                  {{3, 2, 3}, {3, 2}, {1, 2, 3}, {1, 2, 3}})
                            .Values(1, {1, 1, 1, 0, 1, 1})
                            .NoGradient(1)
                            .NoGradient(0)
                            .NoGradient(3)
                            .Tops(3)
                            .Name("exposed_h0_gradient_only"),
                        LayerCase(CREMA_LSTM_PARAM(2, "expose_hidden: true"),
                                  {{3, 3, 2}, {3, 3}, {3, 4}, {1, 3, 2}, {1, 3, 2}})
                            .Values(1, {1, 1, 0, 0, 1, 1, 1, 0, 1})
                            .NoGradient(1)
                            .Tops(3)
                            .Name("exposed_static"),
                        LayerCase(CREMA_LSTM_PARAM(3, ""), {{3, 2, 3}, {3, 2}})
                            .Values(1, {1, 1, 0, 1, 1, 1})
                            .NoGradient(1)
                            .Forwards(2)
                            .NoGradientCheck()
                            .Name("carried"),
                        LayerCase(CREMA_LSTM_PARAM(2, ""), {{3, 2, 3}, {3, 2}, {2, 2}})
                            .Values(1, {1, 0, 1, 1, 1, 0})
                            .NoGradient(1)
                            .Forwards(2)
                            .NoGradientCheck()
                            .Name("carried_static"),
                        LayerCase(CREMA_LSTM_PARAM(2, "debug_info: true"), {{2, 1, 3}, {2, 1}})
                            .Values(1, {0, 1})
                            .NoGradient(1)
                            .Name("debug_info"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

double Sig(double x) { return 1 / (1 + std::exp(-x)); }

// Naive double LSTM with the layer's weights (gate rows i, f, o, g).
std::vector<double> ReferenceLSTM(const Layer& layer, int steps, int streams, int in,
                                  const std::vector<double>& x, const std::vector<double>& cont,
                                  const std::vector<double>* xs, int static_dim,
                                  std::vector<double> h, std::vector<double> c) {
  const int G = static_cast<int>(layer.blobs()[1]->count()), H = G / 4;
  auto w = [&](int blob, int r, int k, int cols) {
    return layer.blobs()[blob]->data_at(r * cols + k);
  };
  const int p = xs ? 3 : 2;
  std::vector<double> out;
  for (int t = 0; t < steps; ++t) {
    std::vector<double> next_h(streams * H), next_c(streams * H);
    for (int n = 0; n < streams; ++n) {
      const double cn = cont[t * streams + n];
      std::vector<double> gate(G);
      for (int r = 0; r < G; ++r) {
        double s = layer.blobs()[1]->data_at(r);
        for (int k = 0; k < in; ++k) s += w(0, r, k, in) * x[(t * streams + n) * in + k];
        for (int k = 0; k < H; ++k) s += w(p, r, k, H) * cn * h[n * H + k];
        if (xs)
          for (int k = 0; k < static_dim; ++k)
            s += w(2, r, k, static_dim) * (*xs)[n * static_dim + k];
        gate[r] = s;
      }
      for (int d = 0; d < H; ++d) {
        const double i = Sig(gate[d]), f = cn * Sig(gate[H + d]), o = Sig(gate[2 * H + d]),
                     g = std::tanh(gate[3 * H + d]);
        next_c[n * H + d] = f * c[n * H + d] + i * g;
        next_h[n * H + d] = o * std::tanh(next_c[n * H + d]);
      }
    }
    h = next_h;
    c = next_c;
    out.insert(out.end(), h.begin(), h.end());
  }
  out.insert(out.end(), c.begin(), c.end());  // c_T last
  return out;
}

TEST(LSTMValues, MatchNaiveReferenceWithResets) {
  const int T = 4, N = 2, I = 3, S = 2, H = 3;
  const std::vector<double> cont = {0, 0, 1, 1, 1, 0, 1, 1};
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static);
    auto layer = CreateLayer("type: 'LSTM' " CREMA_LSTM_PARAM(3, ""));
    Blob x({T, N, I}, DataType::kFloat64), xs({N, S}, DataType::kFloat64);
    testing::FillUniform(&x, -1, 1, 7);
    testing::FillUniform(&xs, -1, 1, 8);
    auto c = MakeBlob({T, N}, cont);
    BlobVec bottom = {&x, c.get()};
    if (with_static) bottom.push_back(&xs);
    Blob top;
    layer->SetUp(bottom, {&top});
    ASSERT_EQ(top.shape(), (std::vector<int>{T, N, H}));
    std::vector<std::vector<int>> shapes = {{4 * H, I}, {4 * H}};
    if (with_static) shapes.push_back({4 * H, S});
    shapes.push_back({4 * H, H});
    ASSERT_EQ(layer->blobs().size(), shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i)
      EXPECT_EQ(layer->blobs()[i]->shape(), shapes[i]) << i;
    for (int run = 0; run < 2; ++run) {
      layer->Forward(bottom, {&top});
      const std::vector<double> xsv = testing::DataOf(xs);
      const std::vector<double> expected =
          ReferenceLSTM(*layer, T, N, I, testing::DataOf(x), cont, with_static ? &xsv : nullptr, S,
                        std::vector<double>(N * H, 0), std::vector<double>(N * H, 0));
      for (int i = 0; i < T * N * H; ++i) EXPECT_NEAR(top.data_at(i), expected[i], 1e-12) << i;
    }
  }
}

TEST(LSTMValues, ExposedStatesInAndOut) {
  const int T = 3, N = 2, I = 2, H = 2;
  auto layer = CreateLayer("type: 'LSTM' " CREMA_LSTM_PARAM(2, "expose_hidden: true"));
  Blob x({T, N, I}, DataType::kFloat64), h0({1, N, H}, DataType::kFloat64),
      c0({1, N, H}, DataType::kFloat64);
  testing::FillUniform(&x, -1, 1, 12);
  testing::FillUniform(&h0, -1, 1, 13);
  testing::FillUniform(&c0, -1, 1, 14);
  const std::vector<double> cont = {1, 1, 1, 0, 1, 1};
  auto bc = MakeBlob({T, N}, cont);
  Blob top, h_t, c_t;
  layer->SetUp({&x, bc.get(), &h0, &c0}, {&top, &h_t, &c_t});
  layer->Forward({&x, bc.get(), &h0, &c0}, {&top, &h_t, &c_t});
  const std::vector<double> expected =
      ReferenceLSTM(*layer, T, N, I, testing::DataOf(x), cont, nullptr, 0, testing::DataOf(h0),
                    testing::DataOf(c0));
  for (int i = 0; i < T * N * H; ++i) EXPECT_NEAR(top.data_at(i), expected[i], 1e-12) << i;
  for (int i = 0; i < N * H; ++i) {
    EXPECT_NEAR(h_t.data_at(i), expected[(T - 1) * N * H + i], 1e-12);
    EXPECT_NEAR(c_t.data_at(i), expected[T * N * H + i], 1e-12);
  }
}

TEST(LSTMValues, StateCarriesAcrossBatches) {
  const std::string text = "type: 'LSTM' " CREMA_LSTM_PARAM(3, "");
  auto whole = CreateLayer(text), halves = CreateLayer(text);
  Blob x({4, 2, 3}, DataType::kFloat64);
  testing::FillUniform(&x, -1, 1, 9);
  const std::vector<double> xv = testing::DataOf(x);
  auto cont = MakeBlob({4, 2}, {0, 0, 1, 1, 1, 0, 1, 1});
  Blob top_whole, top_half;
  whole->SetUp({&x, cont.get()}, {&top_whole});
  whole->Forward({&x, cont.get()}, {&top_whole});
  auto x1 = MakeBlob({2, 2, 3}, std::vector<double>(xv.begin(), xv.begin() + 12));
  auto x2 = MakeBlob({2, 2, 3}, std::vector<double>(xv.begin() + 12, xv.end()));
  auto c1 = MakeBlob({2, 2}, {0, 0, 1, 1});
  auto c2 = MakeBlob({2, 2}, {1, 0, 1, 1});
  halves->SetUp({x1.get(), c1.get()}, {&top_half});
  testing::CopyParams(*whole, halves.get());
  halves->Forward({x1.get(), c1.get()}, {&top_half});
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(top_half.data_at(i), top_whole.data_at(i), 1e-12);
  halves->Forward({x2.get(), c2.get()}, {&top_half});
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(top_half.data_at(i), top_whole.data_at(12 + i), 1e-12);
}

TEST(LSTMGradient, WithSequenceResets) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static);
    auto layer = CreateLayer("type: 'LSTM' " CREMA_LSTM_PARAM(3, ""));
    Blob x({4, 2, 3}, DataType::kFloat64), xs({2, 2}, DataType::kFloat64);
    testing::FillUniform(&x, -1, 1, 10);
    testing::FillUniform(&xs, -1, 1, 11);
    auto cont = MakeBlob({4, 2}, {0, 0, 1, 1, 1, 0, 1, 1});
    BlobVec bottom = {&x, cont.get()};
    if (with_static) bottom.push_back(&xs);
    Blob top;
    layer->SetUp(bottom, {&top});
    testing::GradientCheckOptions options;
    options.no_gradient_bottoms = {1};
    testing::CheckGradient(layer.get(), bottom, {&top}, options);
  }
}

TEST(LSTMErrors, ParametersShapesAndBlobs) {
  Blob top, h_t, c_t;
  auto x = MakeBlob({3, 2, 4}, {});
  auto cont = MakeBlob({3, 2}, {});
  auto layer = CreateLayer("name: 'l' type: 'LSTM' recurrent_param { num_output: 0 }");
  try {
    layer->SetUp({x.get(), cont.get()}, {&top});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent_param.num_output must be > 0"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"l\" (LSTM)"), std::string::npos);
  }
  // expose_hidden needs h0 and c0 bottoms and hT, cT tops.
  auto exposed = CreateLayer("type: 'LSTM' recurrent_param { num_output: 2 expose_hidden: true }");
  EXPECT_THROW(exposed->SetUp({x.get(), cont.get()}, {&top, &h_t, &c_t}), ConfigError);
  auto h0 = MakeBlob({1, 2, 2}, {}), c0 = MakeBlob({1, 2, 3}, {});
  auto exposed2 = CreateLayer("type: 'LSTM' recurrent_param { num_output: 2 expose_hidden: true }");
  EXPECT_THROW(exposed2->SetUp({x.get(), cont.get(), h0.get(), c0.get()}, {&top, &h_t, &c_t}),
               ConfigError);
  // Weights of the wrong shape.
  LayerParameter param = testing::ParseLayerParam("type: 'LSTM' recurrent_param { num_output: 2 }");
  for (std::vector<int> s : {std::vector<int>{8, 4}, {8}, {8, 3}}) {
    BlobProto* blob = param.add_blobs();
    for (int d : s) blob->mutable_shape()->add_dim(d);
    for (int i = 0, n = s.size() == 1 ? s[0] : s[0] * s[1]; i < n; ++i) blob->add_data(0);
  }
  auto bad = LayerRegistry::Create(param);
  bad->set_dtype(DataType::kFloat64);
  try {
    bad->SetUp({x.get(), cont.get()}, {&top});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("W_hc shape mismatch: expected (8 2), got (8 3)"),
              std::string::npos)
        << e.what();
  }
  auto lstm = CreateLayer("type: 'LSTM' recurrent_param { num_output: 2 }");
  lstm->SetUp({x.get(), cont.get()}, {&top});
  lstm->Forward({x.get(), cont.get()}, {&top});
  EXPECT_THROW(lstm->Backward({&top}, {true, true}, {x.get(), cont.get()}), ConfigError);
  EXPECT_THROW(lstm->SetUp({x.get(), cont.get()}, {x.get()}), ConfigError);  // not in-place
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(LSTMCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(
      dir, "lstm", {{"inputs/seq.f32", {4, 2, 3}}, {"inputs/cont.f32", {4, 2}}},
      {"fwd/092_lstm__top0_lstm.f32"}, {"bwd/094_lstm_last__bottom0_lstm.f32"},
      {"bwd/092_lstm__bottom0_seq_in_seq_0_split_0.f32", ""},
      {"grad/092_lstm__param0.f32", "grad/092_lstm__param1.f32", "grad/092_lstm__param2.f32"});
}

}  // namespace
}  // namespace crema
