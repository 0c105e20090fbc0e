#include "layers/multinomial_logistic_loss/multinomial_logistic_loss_layer.hpp"

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
    MultinomialLogisticLoss, LayerCase("", {{4, 5}, {4}}).Integer(1, 5).Range(0.05, 1),
    LayerCase("", {{3, 2, 2, 2}, {3, 1, 1, 1}}).Integer(1, 8).Range(0.05, 1).Name("nchw"),
    LayerCase("loss_weight: 0.25", {{6, 3}, {6}}).Integer(1, 3).Range(0.2, 0.9).Name("weighted"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::MakeBlob;

TEST(MultinomialLogisticLossValues, HandComputedWithClamp) {
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    auto layer = CreateLayer("type: 'MultinomialLogisticLoss' loss_weight: 3", dtype);
    // Item 0: p(label 1) = 0.25; item 1: p(label 0) = 0, clamped to 1e-20.
    auto prob = MakeBlob({2, 2}, {0.75, 0.25, 0, 1}, dtype);
    auto labels = MakeBlob({2}, {1, 0}, dtype);
    Blob loss;
    layer->SetUp({prob.get(), labels.get()}, {&loss});
    layer->Forward({prob.get(), labels.get()}, {&loss});
    const double expected = (-std::log(0.25) - std::log(1e-20)) / 2;
    EXPECT_NEAR(loss.data_at(0), expected, 1e-5 * expected);
    layer->Backward({&loss}, {true, false}, {prob.get(), labels.get()});
    EXPECT_EQ(prob->diff_at(0), 0.0);
    EXPECT_NEAR(prob->diff_at(1), -3.0 / 2 / 0.25, 1e-5);
    EXPECT_NEAR(prob->diff_at(2), -3.0 / 2 / 1e-20, 1e-5 * 1.5e20);
    EXPECT_EQ(prob->diff_at(3), 0.0);
  }
}

TEST(MultinomialLogisticLossErrors, BadLabelsAndShapes) {
  Blob loss;
  auto layer = CreateLayer("type: 'MultinomialLogisticLoss'");
  auto prob = MakeBlob({2, 3}, {0.2, 0.3, 0.5, 0.1, 0.1, 0.8});
  auto labels = MakeBlob({2}, {0, 3});
  layer->SetUp({prob.get(), labels.get()}, {&loss});
  EXPECT_THROW(layer->Forward({prob.get(), labels.get()}, {&loss}), RuntimeError);
  auto layer2 = CreateLayer("type: 'MultinomialLogisticLoss'");
  auto two_per_item = MakeBlob({2, 2}, {});
  try {
    layer2->SetUp({prob.get(), two_per_item.get()}, {&loss});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("one label per item"), std::string::npos) << e.what();
  }
  auto layer3 = CreateLayer("type: 'MultinomialLogisticLoss'");
  auto ok = MakeBlob({2}, {0, 1});
  layer3->SetUp({prob.get(), ok.get()}, {&loss});
  layer3->Forward({prob.get(), ok.get()}, {&loss});
  EXPECT_THROW(layer3->Backward({&loss}, {true, true}, {prob.get(), ok.get()}), ConfigError);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(MultinomialLogisticLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "loss_multinomial",
                {{"fwd/130_scores_prob__top0_scores_prob.f32", {2, 10}}, {"inputs/label.f32", {2}}},
                {"fwd/142_loss_multinomial__top0_loss_multinomial.f32"}, {},
                {"bwd/142_loss_multinomial__bottom0_scores_prob.f32", ""}, {});
}

}  // namespace
}  // namespace crema
