#include "layers/sigmoid_cross_entropy_loss/sigmoid_cross_entropy_loss_layer.hpp"

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
    SigmoidCrossEntropyLoss, LayerCase("", {{4, 5}, {4, 5}}).NoGradient(1).Range(-3, 3),
    LayerCase("", {{2, 3, 2, 2}, {2, 12}}).Integer(1, 2).Name("binary_targets"),
    LayerCase("loss_param { normalization: FULL }", {{4, 5}, {4, 5}}).NoGradient(1),
    LayerCase("loss_param { normalization: VALID }", {{4, 5}, {4, 5}}).NoGradient(1),
    LayerCase("loss_param { normalization: NONE }", {{4, 5}, {4, 5}}).NoGradient(1),
    LayerCase("loss_param { normalize: true }", {{4, 5}, {4, 5}}).NoGradient(1),
    LayerCase("loss_param { ignore_label: 2 }", {{4, 5}, {4, 5}}).Integer(1, 3),
    LayerCase("loss_param { ignore_label: 2 normalization: VALID }", {{4, 5}, {4, 5}})
        .Integer(1, 3),
    LayerCase("loss_weight: 3", {{6, 2}, {6, 2}}).NoGradient(1).Range(-8, 8));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

struct Expected {
  double loss = 0;
  std::vector<double> diff;
};

// Naive double: -[t log s + (1 - t) log(1 - s)], s = sigmoid(x).
Expected Reference(const std::vector<double>& x, const std::vector<double>& t, int num,
                   const std::string& norm, bool has_ignore, int ignore) {
  Expected e;
  e.diff.assign(x.size(), 0);
  int valid = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (has_ignore && static_cast<int>(t[i]) == ignore) continue;
    const double s = 1 / (1 + std::exp(-x[i]));
    e.loss -= t[i] * std::log(s) + (1 - t[i]) * std::log(1 - s);
    e.diff[i] = s - t[i];
    ++valid;
  }
  double normalizer = num;  // BATCH_SIZE, the default here
  if (norm == "FULL") normalizer = static_cast<double>(x.size());
  if (norm == "VALID") normalizer = valid;
  if (norm == "NONE") normalizer = 1;
  normalizer = std::max(1.0, normalizer);
  e.loss /= normalizer;
  for (double& d : e.diff) d /= normalizer;
  return e;
}

TEST(SigmoidCrossEntropyLossValues, MatchNaiveReference) {
  const std::vector<double> x = {-3, -0.5, 0, 0.25, 2, 7, -12, 1.5};
  const std::vector<double> t = {0, 1, 0.5, 1, 0, 1, 2, 0.25};  // 2 = ignored where asked
  struct Mode {
    std::string param, norm;
    bool ignore;
  };
  for (const Mode& m :
       {Mode{"", "", false}, Mode{"loss_param { normalization: FULL }", "FULL", false},
        Mode{"loss_param { normalization: VALID }", "VALID", false},
        Mode{"loss_param { normalization: NONE }", "NONE", false},
        Mode{"loss_param { normalize: true }", "VALID", false},
        Mode{"loss_param { normalize: false }", "", false},
        Mode{"loss_param { ignore_label: 2 }", "", true},
        Mode{"loss_param { ignore_label: 2 normalization: VALID }", "VALID", true}}) {
    SCOPED_TRACE(m.param);
    auto layer = CreateLayer("type: 'SigmoidCrossEntropyLoss' loss_weight: 2 " + m.param);
    auto scores = MakeBlob({2, 4}, x);
    auto targets = MakeBlob({2, 4}, t);
    Blob loss;
    layer->SetUp({scores.get(), targets.get()}, {&loss});
    const double weighted = layer->Forward({scores.get(), targets.get()}, {&loss});
    const Expected e = Reference(x, t, 2, m.norm, m.ignore, 2);
    // Without ignore_label the target 2 is just an (out-of-range) target, as in Caffe.
    EXPECT_NEAR(loss.data_at(0), e.loss, 1e-12);
    EXPECT_NEAR(weighted, 2 * loss.data_at(0), 1e-12);
    layer->Backward({&loss}, {true, false}, {scores.get(), targets.get()});
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(scores->diff_at(i), 2 * e.diff[i], 1e-12) << i;
  }
}

TEST(SigmoidCrossEntropyLossValues, StableForLargeInputs) {
  auto layer = CreateLayer("type: 'SigmoidCrossEntropyLoss'", DataType::kFloat32);
  auto scores = MakeBlob({1, 2}, {100, -100}, DataType::kFloat32);
  auto targets = MakeBlob({1, 2}, {0, 1}, DataType::kFloat32);
  Blob loss;
  layer->SetUp({scores.get(), targets.get()}, {&loss});
  layer->Forward({scores.get(), targets.get()}, {&loss});
  EXPECT_NEAR(loss.data_at(0), 200.0, 1e-3);  // no inf/NaN from exp(100)
}

TEST(SigmoidCrossEntropyLossErrors, CountMismatchAndTargetGradient) {
  Blob loss;
  auto layer = CreateLayer("type: 'SigmoidCrossEntropyLoss'");
  auto scores = MakeBlob({2, 3}, {});
  auto targets = MakeBlob({2, 4}, {});
  try {
    layer->SetUp({scores.get(), targets.get()}, {&loss});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("as many values"), std::string::npos) << e.what();
  }
  auto layer2 = CreateLayer("type: 'SigmoidCrossEntropyLoss'");
  auto good = MakeBlob({2, 3}, {});
  layer2->SetUp({scores.get(), good.get()}, {&loss});
  layer2->Forward({scores.get(), good.get()}, {&loss});
  EXPECT_THROW(layer2->Backward({&loss}, {true, true}, {scores.get(), good.get()}), ConfigError);
  EXPECT_FALSE(layer2->AllowForceBackward(1));
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(SigmoidCrossEntropyLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "loss_sigce",
                {{"fwd/124_ip__top0_ip.f32", {2, 10}}, {"inputs/target01.f32", {2, 10}}},
                {"fwd/137_loss_sigce__top0_loss_sigce.f32"}, {},
                {"bwd/137_loss_sigce__bottom0_ip_ip_0_split_1.f32", ""}, {});
}

}  // namespace
}  // namespace crema
