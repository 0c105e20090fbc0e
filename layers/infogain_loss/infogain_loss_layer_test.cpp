#include "layers/infogain_loss/infogain_loss_layer.hpp"

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

namespace {

// A 5 x 5 H written to a temporary binaryproto, for the infogain_loss_param.source cases.
std::string WriteInfogainFile() {
  crema::BlobProto proto;
  for (int d : {1, 1, 5, 5}) proto.mutable_shape()->add_dim(d);
  for (int i = 0; i < 25; ++i) proto.add_data(i % 6 == 0 ? 1.0f : 0.1f * (i % 4));
  const std::string path = crema::testing::TempDir() + "/infogain_H.binaryproto";
  std::ofstream out(path, std::ios::binary);
  proto.SerializeToOstream(&out);
  return path;
}

const std::string kInfogainPath = WriteInfogainFile();
const std::string kSource = "infogain_loss_param { source: '" + kInfogainPath + "' } ";

}  // namespace

CREMA_LAYER_CONFORMANCE(
    InfogainLoss, LayerCase("", {{4, 5}, {4}, {5, 5}}).Integer(1, 5).NoGradient(2).Range(0, 2),
    LayerCase(kSource, {{4, 5}, {4}}).Integer(1, 5).Name("source"),
    LayerCase(kSource + "loss_param { normalization: FULL }", {{3, 5, 2}, {3, 2}})
        .Integer(1, 5)
        .Name("source_full_spatial"),
    LayerCase("infogain_loss_param { axis: 2 }", {{2, 3, 4}, {2, 3}, {1, 1, 4, 4}})
        .Integer(1, 4)
        .NoGradient(2)
        .Name("axis2"),
    LayerCase("infogain_loss_param { axis: -1 } loss_param { normalization: BATCH_SIZE }",
              {{2, 3, 4}, {2, 3}, {4, 4}})
        .Integer(1, 4)
        .NoGradient(2)
        .Name("axis_last_batch"),
    LayerCase(kSource + "loss_param { ignore_label: 2 }", {{6, 5}, {6}})
        .Integer(1, 5)
        .Name("ignore"),
    LayerCase(kSource + "loss_param { ignore_label: 2 normalization: NONE }", {{6, 5}, {6}})
        .Integer(1, 5)
        .Name("ignore_none"),
    LayerCase(kSource + "loss_weight: 1 loss_weight: 0", {{4, 5}, {4}})
        .Integer(1, 5)
        .Tops(2)
        .Name("prob_top"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

// Naive double: softmax over C (axis 1 of outer x C x inner), then -sum_k H[l, k] log p_k.
void Reference(int outer, int channels, int inner, const std::vector<double>& x,
               const std::vector<double>& label, const std::vector<double>& h,
               double normalizer_mode, bool has_ignore, int ignore, double* loss,
               std::vector<double>* diff) {
  *loss = 0;
  diff->assign(x.size(), 0);
  int valid = 0;
  for (int o = 0; o < outer; ++o)
    for (int j = 0; j < inner; ++j) {
      const int l = static_cast<int>(label[o * inner + j]);
      if (has_ignore && l == ignore) continue;
      ++valid;
      double max_x = -1e300, sum = 0;
      for (int c = 0; c < channels; ++c) max_x = std::max(max_x, x[(o * channels + c) * inner + j]);
      for (int c = 0; c < channels; ++c) sum += std::exp(x[(o * channels + c) * inner + j] - max_x);
      double row = 0;
      for (int c = 0; c < channels; ++c) row += h[l * channels + c];
      for (int c = 0; c < channels; ++c) {
        const int at = (o * channels + c) * inner + j;
        const double p = std::exp(x[at] - max_x) / sum;
        *loss -= h[l * channels + c] * std::log(std::max(p, 1e-20));
        (*diff)[at] = p * row - h[l * channels + c];
      }
    }
  double normalizer = normalizer_mode < 0 ? valid : normalizer_mode;
  normalizer = std::max(1.0, normalizer);
  *loss /= normalizer;
  for (double& d : *diff) d /= normalizer;
}

TEST(InfogainLossValues, MatchNaiveReference) {
  const int outer = 3, channels = 4, inner = 2;
  Blob x64({outer, channels, inner}, DataType::kFloat64);
  testing::FillUniform(&x64, -2, 2, 5);
  const std::vector<double> x = testing::DataOf(x64);
  const std::vector<double> label = {0, 3, 1, 1, 2, 1};
  std::vector<double> h(16);
  for (int i = 0; i < 16; ++i) h[i] = (i % 5 == 0) ? 1.0 : 0.05 * i;
  struct Mode {
    std::string param;
    double normalizer;  // < 0: valid count
    bool ignore;
  };
  for (const Mode& m : {Mode{"", -1, false}, Mode{"loss_param { normalization: FULL }", 6, false},
                        Mode{"loss_param { normalization: BATCH_SIZE }", 3, false},
                        Mode{"loss_param { normalization: NONE }", 1, false},
                        Mode{"loss_param { ignore_label: 1 }", -1, true},
                        Mode{"loss_param { ignore_label: 1 normalization: FULL }", 6, true}}) {
    SCOPED_TRACE(m.param);
    auto layer = CreateLayer("type: 'InfogainLoss' loss_weight: 0.5 " + m.param);
    auto scores = MakeBlob({outer, channels, inner}, x);
    auto labels = MakeBlob({outer, inner}, label);
    auto infogain = MakeBlob({channels, channels}, h);
    Blob loss;
    layer->SetUp({scores.get(), labels.get(), infogain.get()}, {&loss});
    layer->Forward({scores.get(), labels.get(), infogain.get()}, {&loss});
    double expected;
    std::vector<double> diff;
    Reference(outer, channels, inner, x, label, h, m.normalizer, m.ignore, 1, &expected, &diff);
    EXPECT_NEAR(loss.data_at(0), expected, 1e-12);
    layer->Backward({&loss}, {true, false, false}, {scores.get(), labels.get(), infogain.get()});
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(scores->diff_at(i), 0.5 * diff[i], 1e-12);
  }
}

TEST(InfogainLossValues, IdentityIsSoftmaxWithLoss) {
  auto scores = MakeBlob({3, 4}, {0.1, -0.5, 2, 0.3, 1, 1, 1, 1, -2, 0, 0.5, 3});
  auto labels = MakeBlob({3}, {2, 0, 3});
  auto identity = MakeBlob({4, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  auto infogain = CreateLayer("type: 'InfogainLoss'");
  auto softmax = CreateLayer("type: 'SoftmaxWithLoss'");
  Blob a, b;
  infogain->SetUp({scores.get(), labels.get(), identity.get()}, {&a});
  infogain->Forward({scores.get(), labels.get(), identity.get()}, {&a});
  softmax->SetUp({scores.get(), labels.get()}, {&b});
  softmax->Forward({scores.get(), labels.get()}, {&b});
  EXPECT_NEAR(a.data_at(0), b.data_at(0), 1e-12);
}

TEST(InfogainLossErrors, ParametersFilesAndLabels) {
  Blob loss;
  auto scores = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto labels = MakeBlob({2}, {0, 1});
  auto expect_config = [&](const std::string& text, const BlobVec& bottom, const char* needle) {
    auto layer = CreateLayer("name: 'ig' type: 'InfogainLoss' " + text);
    try {
      layer->SetUp(bottom, {&loss});
      ADD_FAILURE() << "expected a ConfigError for " << text;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config("", {scores.get(), labels.get()}, "infogain_loss_param.source must name");
  expect_config("loss_param { normalize: true }", {scores.get(), labels.get()},
                "loss_param.normalize is deprecated");
  auto wrong_h = MakeBlob({2, 2}, {});
  expect_config("", {scores.get(), labels.get(), wrong_h.get()}, "H must be 3 x 3");
  expect_config(kSource, {scores.get(), labels.get()}, "H must be 3 x 3");  // the file is 5 x 5
  expect_config("infogain_loss_param { axis: 2 }", {scores.get(), labels.get(), wrong_h.get()},
                "infogain_loss_param.axis must be in [-2, 2)");

  auto missing =
      CreateLayer("type: 'InfogainLoss' infogain_loss_param { source: '/nonexistent/H' }");
  EXPECT_THROW(missing->SetUp({scores.get(), labels.get()}, {&loss}), RuntimeError);

  auto h = MakeBlob({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto bad_labels = MakeBlob({2}, {0, 3});
  auto layer = CreateLayer("type: 'InfogainLoss'");
  layer->SetUp({scores.get(), bad_labels.get(), h.get()}, {&loss});
  EXPECT_THROW(layer->Forward({scores.get(), bad_labels.get(), h.get()}, {&loss}), RuntimeError);
  auto layer2 = CreateLayer("type: 'InfogainLoss'");
  layer2->SetUp({scores.get(), labels.get(), h.get()}, {&loss});
  layer2->Forward({scores.get(), labels.get(), h.get()}, {&loss});
  EXPECT_THROW(
      layer2->Backward({&loss}, {true, false, true}, {scores.get(), labels.get(), h.get()}),
      ConfigError);
  EXPECT_FALSE(layer2->AllowForceBackward(2));
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(InfogainLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(
      dir, "loss_infogain", {{"fwd/126_ip_t__top0_ip_t.f32", {2, 10}}, {"inputs/label.f32", {2}}},
      {"fwd/140_loss_infogain__top0_loss_infogain.f32"}, {},
      {"bwd/140_loss_infogain__bottom0_ip_t_ip_t_0_split_2.f32", ""}, {}, [&](LayerParameter* p) {
        // The prototxt's source is relative to bvlc/.
        p->mutable_infogain_loss_param()->set_source(dir + "/infogain_H.binaryproto");
      });
}

}  // namespace
}  // namespace crema
