#include "layers/contrastive_loss/contrastive_loss_layer.hpp"

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

// Caffe's 1e-4 in the dissimilar gradient, (margin - d) / (d + 1e-4), makes the analytic
// gradient differ from the exact one by ~1e-4 relative: hence Threshold(1e-3) there.
CREMA_LAYER_CONFORMANCE(
    ContrastiveLoss, LayerCase("", {{6, 3}, {6, 3}, {6}}).Integer(2, 2).Threshold(1e-3),
    LayerCase("contrastive_loss_param { margin: 2.5 }", {{6, 3, 1, 1}, {6, 3, 1, 1}, {6, 1, 1, 1}})
        .Integer(2, 2)
        .Threshold(1e-3)
        .Name("margin_nchw"),
    LayerCase("contrastive_loss_param { margin: 1.7 legacy_version: true }", {{6, 4}, {6, 4}, {6}})
        .Integer(2, 2)
        .Name("legacy"),
    LayerCase("loss_weight: 2 contrastive_loss_param { margin: 2 }", {{5, 3}, {5, 3}, {5}})
        .Integer(2, 2)
        .Threshold(1e-3)
        .Name("weighted"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

TEST(ContrastiveLossValues, MatchNaiveReference) {
  // Pairs: similar; dissimilar inside the margin; dissimilar beyond it.
  const std::vector<double> a = {1, 2, 0, 0, 3, 0};
  const std::vector<double> b = {0, 0, 0.6, 0.8, 0, 0};
  const std::vector<double> sim = {1, 0, 0};
  const double margin = 2;
  for (bool legacy : {false, true}) {
    auto layer =
        CreateLayer(StrCat("type: 'ContrastiveLoss' loss_weight: 1.5 "
                           "contrastive_loss_param { margin: 2 legacy_version: ",
                           legacy ? "true" : "false", " }"));
    auto ba = MakeBlob({3, 2}, a);
    auto bb = MakeBlob({3, 2}, b);
    auto bs = MakeBlob({3}, sim);
    Blob loss;
    layer->SetUp({ba.get(), bb.get(), bs.get()}, {&loss});
    layer->Forward({ba.get(), bb.get(), bs.get()}, {&loss});
    double expected = 0;
    std::vector<double> da(6, 0);
    for (int n = 0; n < 3; ++n) {
      const double dx = a[2 * n] - b[2 * n], dy = a[2 * n + 1] - b[2 * n + 1];
      const double d2 = dx * dx + dy * dy, d = std::sqrt(d2);
      double g = 0;
      if (sim[n] != 0) {
        expected += d2;
        g = 1;
      } else if (legacy) {
        expected += std::max(margin - d2, 0.0);
        g = margin - d2 > 0 ? -1 : 0;
      } else {
        expected += std::pow(std::max(margin - d, 0.0), 2);
        g = margin - d > 0 ? -(margin - d) / (d + 1e-4) : 0;
      }
      da[2 * n] = 1.5 / 3 * g * dx;
      da[2 * n + 1] = 1.5 / 3 * g * dy;
    }
    EXPECT_NEAR(loss.data_at(0), expected / 6, 1e-12) << legacy;
    layer->Backward({&loss}, {true, true, false}, {ba.get(), bb.get(), bs.get()});
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(ba->diff_at(i), da[i], 1e-12) << legacy << " " << i;
      EXPECT_NEAR(bb->diff_at(i), -da[i], 1e-12) << legacy << " " << i;
    }
  }
}

TEST(ContrastiveLossErrors, ShapesAndSimilarityGradient) {
  Blob loss;
  auto a = MakeBlob({3, 2}, {});
  auto b3 = MakeBlob({3, 3}, {});
  auto sim = MakeBlob({3}, {});
  auto layer = CreateLayer("type: 'ContrastiveLoss'");
  try {
    layer->SetUp({a.get(), b3.get(), sim.get()}, {&loss});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("N x C"), std::string::npos) << e.what();
  }
  auto layer2 = CreateLayer("type: 'ContrastiveLoss'");
  auto sim2 = MakeBlob({3, 2}, {});
  EXPECT_THROW(layer2->SetUp({a.get(), a.get(), sim2.get()}, {&loss}), ConfigError);
  auto layer3 = CreateLayer("type: 'ContrastiveLoss'");
  auto spatial = MakeBlob({3, 2, 2, 2}, {});
  EXPECT_THROW(layer3->SetUp({spatial.get(), spatial.get(), sim.get()}, {&loss}), ConfigError);
  auto layer4 = CreateLayer("type: 'ContrastiveLoss'");
  auto b = MakeBlob({3, 2}, {});
  layer4->SetUp({a.get(), b.get(), sim.get()}, {&loss});
  layer4->Forward({a.get(), b.get(), sim.get()}, {&loss});
  EXPECT_THROW(layer4->Backward({&loss}, {true, true, true}, {a.get(), b.get(), sim.get()}),
               ConfigError);
  EXPECT_TRUE(layer4->AllowForceBackward(1));
  EXPECT_FALSE(layer4->AllowForceBackward(2));
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(ContrastiveLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "loss_contrastive",
                {{"fwd/096_lstm_last_flat__top0_lstm_vec.f32", {2, 5}},
                 {"fwd/133_ip_c__top0_ip_c.f32", {2, 5}},
                 {"inputs/sim.f32", {2}}},
                {"fwd/141_loss_contrastive__top0_loss_contrastive.f32"}, {},
                {"bwd/141_loss_contrastive__bottom0_lstm_vec_lstm_last_flat_0_split_2.f32",
                 "bwd/141_loss_contrastive__bottom1_ip_c.f32", ""},
                {});
}

}  // namespace
}  // namespace crema
