#include "layers/euclidean_loss/euclidean_loss_layer.hpp"

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

CREMA_LAYER_CONFORMANCE(EuclideanLoss, LayerCase("", {{4, 5}, {4, 5}}),
                        LayerCase("", {{2, 3, 2, 2}, {2, 12}}).Name("different_shapes"),
                        LayerCase("loss_weight: 2.5", {{3, 4}, {3, 4}}).Name("weighted"),
                        LayerCase("", {{3, 4}, {3, 4}}).NoGradient(1).Name("one_side"));

namespace crema {
namespace {

using testing::CheckLayerZoo;
using testing::CreateLayer;
using testing::DiffOf;
using testing::MakeBlob;

TEST(EuclideanLossValues, HandComputed) {
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    for (double weight : {1.0, 0.5}) {
      auto layer = CreateLayer(StrCat("type: 'EuclideanLoss' loss_weight: ", weight), dtype);
      auto a = MakeBlob({2, 2}, {1, 2, 3, 4}, dtype);
      auto b = MakeBlob({2, 2}, {0, 2, 1, 1}, dtype);
      Blob loss;
      layer->SetUp({a.get(), b.get()}, {&loss});
      // diff = (1, 0, 2, 3): (1 + 4 + 9) / 2 items / 2 = 3.5.
      const double weighted = layer->Forward({a.get(), b.get()}, {&loss});
      EXPECT_NEAR(loss.data_at(0), 3.5, 1e-6);
      EXPECT_NEAR(weighted, 3.5 * weight, 1e-6);
      layer->Backward({&loss}, {true, true}, {a.get(), b.get()});
      const std::vector<double> da = {0.5, 0, 1, 1.5};
      for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(a->diff_at(i), weight * da[i], 1e-6) << i;
        EXPECT_NEAR(b->diff_at(i), -weight * da[i], 1e-6) << i;
      }
    }
  }
}

TEST(EuclideanLossValues, NoPropagateDownLeavesDiff) {
  auto layer = CreateLayer("type: 'EuclideanLoss'");
  auto a = MakeBlob({1, 2}, {1, 2});
  auto b = MakeBlob({1, 2}, {0, 0});
  testing::SetDiffOf(b.get(), {7, 7});
  Blob loss;
  layer->SetUp({a.get(), b.get()}, {&loss});
  layer->Forward({a.get(), b.get()}, {&loss});
  layer->Backward({&loss}, {true, false}, {a.get(), b.get()});
  EXPECT_EQ(DiffOf(*b), (std::vector<double>{7, 7}));
  EXPECT_EQ(DiffOf(*a), (std::vector<double>{1, 2}));
  EXPECT_TRUE(layer->AllowForceBackward(1));
}

TEST(EuclideanLossErrors, ShapeMismatchesAreConfigErrors) {
  Blob loss;
  auto layer = CreateLayer("name: 'l' type: 'EuclideanLoss'");
  auto a = MakeBlob({2, 3}, {});
  auto b = MakeBlob({2, 4}, {});
  try {
    layer->SetUp({a.get(), b.get()}, {&loss});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("same number of values per item"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"l\" (EuclideanLoss)"), std::string::npos);
  }
  auto layer2 = CreateLayer("type: 'EuclideanLoss'");
  auto c = MakeBlob({3, 2}, {});
  EXPECT_THROW(layer2->SetUp({a.get(), c.get()}, {&loss}), ConfigError);  // batch differs
  auto layer3 = CreateLayer("type: 'EuclideanLoss'");
  EXPECT_THROW(layer3->SetUp({a.get()}, {&loss}), ConfigError);  // one bottom
}

// ---- against BVLC Caffe's own outputs (layer_zoo: tops, bottom diffs, param diffs) ----

TEST(EuclideanLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(
      dir, "loss_euclid",
      {{"fwd/131_ip_e__top0_ip_e.f32", {2, 10}}, {"inputs/target.f32", {2, 10}}},
      {"fwd/136_loss_euclid__top0_loss_euclid.f32"}, {},
      {"bwd/136_loss_euclid__bottom0_ip_e.f32", "bwd/136_loss_euclid__bottom1_target.f32"}, {});
}

}  // namespace
}  // namespace crema
