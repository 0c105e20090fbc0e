#include "layers/recurrent/rnn_layer.hpp"

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

#define CREMA_RNN_PARAM(n, extra)                          \
  "recurrent_param { num_output: " #n                      \
  " weight_filler { type: 'uniform' min: -0.6 max: 0.6 } " \
  "bias_filler { type: 'gaussian' std: 0.3 } " extra " }"

// The sequence indicators are fixed: every pattern has a 0 in the middle of a sequence. Without
// expose_hidden the state carries over between Forward calls, so the cases the gradient checks
// run (Forward many times) start with cont = 0; the "carried" cases start with cont = 1 and
// compare the second of two Forwards (state carried from the first; no gradient check).
CREMA_LAYER_CONFORMANCE(
    RNN,
    LayerCase(CREMA_RNN_PARAM(3, ""), {{3, 2, 4}, {3, 2}})
        .Values(1, {0, 0, 1, 0, 1, 1})
        .NoGradient(1),
    LayerCase(CREMA_RNN_PARAM(3, ""), {{3, 2, 2, 2}, {3, 2}, {2, 3}})
        .Values(1, {0, 0, 1, 1, 0, 1})
        .NoGradient(1)
        .Name("static"),
    LayerCase(CREMA_RNN_PARAM(3, ""), {{3, 2, 2, 2}, {3, 2}, {2, 3}})
        .Values(1, {0, 0, 0, 1, 1, 1})
        .NoGradient(1)
        .NoGradient(0)
        .Name("static_gradient_only"),
    LayerCase(CREMA_RNN_PARAM(3, "expose_hidden: true"), {{4, 2, 3}, {4, 2}, {1, 2, 3}})
        .Values(1, {1, 0, 1, 1, 0, 1, 1, 1})
        .NoGradient(1)
        .Tops(2)
        .Name("exposed"),
    LayerCase(CREMA_RNN_PARAM(3, "expose_hidden: true"), {{3, 2, 3}, {3, 2}, {1, 2, 3}})
        .Values(1, {1, 1, 1, 0, 1, 1})
        .NoGradient(1)
        .NoGradient(0)
        .Tops(2)
        .Name("exposed_h0_gradient_only"),
    LayerCase(CREMA_RNN_PARAM(2, "expose_hidden: true"), {{3, 3, 2}, {3, 3}, {3, 4}, {1, 3, 2}})
        .Values(1, {1, 1, 0, 0, 1, 1, 1, 0, 1})
        .NoGradient(1)
        .Tops(2)
        .Name("exposed_static"),
    LayerCase(CREMA_RNN_PARAM(3, ""), {{3, 2, 3}, {3, 2}})
        .Values(1, {1, 1, 0, 1, 1, 1})
        .NoGradient(1)
        .Forwards(2)
        .NoGradientCheck()
        .Name("carried"),
    LayerCase(CREMA_RNN_PARAM(2, ""), {{3, 2, 3}, {3, 2}, {2, 2}})
        .Values(1, {1, 0, 1, 1, 1, 0})
        .NoGradient(1)
        .Forwards(2)
        .NoGradientCheck()
        .Name("carried_static"),
    LayerCase(CREMA_RNN_PARAM(4, "debug_info: true"), {{2, 1, 3}, {2, 1}})
        .Values(1, {0, 1})
        .NoGradient(1)
        .Name("debug_info"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

// Naive double RNN with the layer's weights: h_t = tanh(W_hh cont h + W_xh x + b_h [+ W_s xs]),
// o_t = tanh(W_ho h_t + b_o).
std::vector<double> ReferenceRNN(const Layer& layer, int steps, int streams, int in,
                                 const std::vector<double>& x, const std::vector<double>& cont,
                                 const std::vector<double>* xs, int static_dim,
                                 std::vector<double> h) {
  const int H = static_cast<int>(layer.blobs()[1]->count());
  auto w = [&](int blob, int r, int c, int cols) {
    return layer.blobs()[blob]->data_at(r * cols + c);
  };
  const int p = xs ? 3 : 2;
  std::vector<double> out;
  for (int t = 0; t < steps; ++t) {
    std::vector<double> next(streams * H);
    for (int n = 0; n < streams; ++n)
      for (int r = 0; r < H; ++r) {
        double s = layer.blobs()[1]->data_at(r);
        for (int c = 0; c < in; ++c) s += w(0, r, c, in) * x[(t * streams + n) * in + c];
        for (int c = 0; c < H; ++c) s += w(p, r, c, H) * cont[t * streams + n] * h[n * H + c];
        if (xs)
          for (int c = 0; c < static_dim; ++c)
            s += w(2, r, c, static_dim) * (*xs)[n * static_dim + c];
        next[n * H + r] = std::tanh(s);
      }
    h = next;
    for (int n = 0; n < streams; ++n)
      for (int r = 0; r < H; ++r) {
        double s = layer.blobs()[p + 2]->data_at(r);
        for (int c = 0; c < H; ++c) s += w(p + 1, r, c, H) * h[n * H + c];
        out.push_back(std::tanh(s));
      }
  }
  return out;
}

TEST(RNNValues, MatchNaiveReferenceWithResets) {
  const int T = 4, N = 2, I = 3, S = 2, H = 3;
  const std::vector<double> cont = {0, 0, 1, 1, 1, 0, 1, 1};
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static);
    auto layer = CreateLayer("type: 'RNN' " CREMA_RNN_PARAM(3, ""));
    Blob x({T, N, I}, DataType::kFloat64), xs({N, S}, DataType::kFloat64);
    testing::FillUniform(&x, -1, 1, 7);
    testing::FillUniform(&xs, -1, 1, 8);
    auto c = MakeBlob({T, N}, cont);
    BlobVec bottom = {&x, c.get()};
    if (with_static) bottom.push_back(&xs);
    Blob top;
    layer->SetUp(bottom, {&top});
    ASSERT_EQ(top.shape(), (std::vector<int>{T, N, H}));
    // The learnable blobs: Caffe's order and shapes.
    std::vector<std::vector<int>> shapes = {{H, I}, {H}};
    if (with_static) shapes.push_back({H, S});
    for (std::vector<int> s : {std::vector<int>{H, H}, {H, H}, {H}}) shapes.push_back(s);
    ASSERT_EQ(layer->blobs().size(), shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i)
      EXPECT_EQ(layer->blobs()[i]->shape(), shapes[i]) << i;
    // Run twice: cont starts with 0, so the carried state must not matter.
    for (int run = 0; run < 2; ++run) {
      layer->Forward(bottom, {&top});
      const std::vector<double> xsv = testing::DataOf(xs);
      const std::vector<double> expected =
          ReferenceRNN(*layer, T, N, I, testing::DataOf(x), cont, with_static ? &xsv : nullptr, S,
                       std::vector<double>(N * H, 0));
      for (int i = 0; i < T * N * H; ++i) EXPECT_NEAR(top.data_at(i), expected[i], 1e-12) << i;
    }
  }
}

TEST(RNNValues, StateCarriesAcrossBatches) {
  // One batch of 4 steps == two batches of 2 steps when the second continues the sequence.
  const std::string text = "type: 'RNN' " CREMA_RNN_PARAM(3, "");
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

TEST(RNNGradient, WithSequenceResets) {
  for (bool with_static : {false, true}) {
    SCOPED_TRACE(with_static);
    auto layer = CreateLayer("type: 'RNN' " CREMA_RNN_PARAM(3, ""));
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

TEST(RNNErrors, ParametersShapesAndBlobs) {
  Blob top;
  auto x = MakeBlob({3, 2, 4}, {});
  auto cont = MakeBlob({3, 2}, {});
  auto expect_config = [&](const std::string& text, const BlobVec& bottom, const char* needle) {
    auto layer = CreateLayer("name: 'r' type: 'RNN' " + text);
    BlobVec tops = {&top};
    Blob extra;
    if (text.find("expose_hidden") != std::string::npos) tops.push_back(&extra);
    try {
      layer->SetUp(bottom, tops);
      ADD_FAILURE() << "expected a ConfigError: " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config("", {x.get(), cont.get()}, "recurrent_param.num_output must be > 0, got 0");
  auto bad_cont = MakeBlob({3, 3}, {});
  expect_config("recurrent_param { num_output: 2 }", {x.get(), bad_cont.get()},
                "bottom[1] (cont) must be 3 x 2");
  auto flat = MakeBlob({3}, {});
  expect_config("recurrent_param { num_output: 2 }", {flat.get(), cont.get()},
                "must have at least 2 axes");
  auto bad_static = MakeBlob({3, 4}, {});
  expect_config("recurrent_param { num_output: 2 }", {x.get(), cont.get(), bad_static.get()},
                "bottom[2] (x_static) must have 2 (streams)");
  auto bad_h0 = MakeBlob({1, 2, 3}, {});
  expect_config("recurrent_param { num_output: 2 expose_hidden: true }",
                {x.get(), cont.get(), bad_h0.get()}, "(initial state) must be 1 x 2 x 2");

  // Weights of the wrong shape or count.
  LayerParameter param = testing::ParseLayerParam("type: 'RNN' recurrent_param { num_output: 2 }");
  for (int i = 0; i < 4; ++i) {
    BlobProto* blob = param.add_blobs();
    blob->mutable_shape()->add_dim(2);
  }
  auto layer = LayerRegistry::Create(param);
  layer->set_dtype(DataType::kFloat64);
  EXPECT_THROW(layer->SetUp({x.get(), cont.get()}, {&top}), ConfigError);

  // A different input size after set-up; the sequence indicators get no gradient.
  auto rnn = CreateLayer("type: 'RNN' recurrent_param { num_output: 2 }");
  rnn->SetUp({x.get(), cont.get()}, {&top});
  rnn->Forward({x.get(), cont.get()}, {&top});
  EXPECT_THROW(rnn->Backward({&top}, {true, true}, {x.get(), cont.get()}), ConfigError);
  EXPECT_FALSE(rnn->AllowForceBackward(1));
  auto wider = MakeBlob({3, 2, 5}, {});
  EXPECT_THROW(rnn->Forward({wider.get(), cont.get()}, {&top}), ConfigError);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(RNNCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "rnn", {{"inputs/seq.f32", {4, 2, 3}}, {"inputs/cont.f32", {4, 2}}},
                {"fwd/093_rnn__top0_rnn.f32"}, {"bwd/098_rnn_flat__bottom0_rnn.f32"},
                {"bwd/093_rnn__bottom0_seq_in_seq_0_split_1.f32", ""},
                {"grad/093_rnn__param0.f32", "grad/093_rnn__param1.f32", "grad/093_rnn__param2.f32",
                 "grad/093_rnn__param3.f32", "grad/093_rnn__param4.f32"});
}

}  // namespace
}  // namespace crema
