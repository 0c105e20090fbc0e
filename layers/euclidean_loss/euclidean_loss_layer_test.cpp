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
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(EuclideanLoss, LayerCase("", {{4, 5}, {4, 5}}),
                        LayerCase("", {{2, 3, 2, 2}, {2, 12}}).Name("different_shapes"),
                        LayerCase("loss_weight: 2.5", {{3, 4}, {3, 4}}).Name("weighted"),
                        LayerCase("", {{3, 4}, {3, 4}}).NoGradient(1).Name("one_side"));

namespace crema {
namespace {

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

struct ZooBlob {
  std::string file;  // relative to the layer_zoo folder
  std::vector<int> shape;
};

void ExpectNearZoo(const Blob& actual, const std::string& path, bool diff) {
  const std::vector<float> expected = testing::ReadF32(path);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << path;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    EXPECT_NEAR(a, expected[i], 2e-5 * std::max(scale, 1e-3)) << path << " at " << i;
  }
}

// Builds layer `name` from layer_zoo.caffemodel (its parameter and weights), feeds it Caffe's
// bottoms, and compares its tops, bottom diffs (empty file: not propagated) and param diffs.
// Without top_diffs the tops are losses and carry their loss weights.
void CheckLayerZoo(const std::string& dir, const std::string& name,
                   const std::vector<ZooBlob>& bottoms, const std::vector<std::string>& tops,
                   const std::vector<std::string>& top_diffs,
                   const std::vector<std::string>& bottom_diffs,
                   const std::vector<std::string>& param_diffs,
                   const std::function<void(LayerParameter*)>& edit = nullptr) {
  NetParameter net;
  {
    std::ifstream in(dir + "/layer_zoo.caffemodel", std::ios::binary);
    ASSERT_TRUE(net.ParseFromIstream(&in));
  }
  const LayerParameter* found = nullptr;
  for (const LayerParameter& l : net.layer())
    if (l.name() == name) found = &l;
  ASSERT_NE(found, nullptr) << name;
  LayerParameter param = *found;
  if (edit) edit(&param);
  std::unique_ptr<Layer> layer = LayerRegistry::Create(param);
  std::vector<std::unique_ptr<Blob>> owned;
  BlobVec bottom, top;
  for (const ZooBlob& b : bottoms) {
    owned.push_back(std::make_unique<Blob>(b.shape));
    const std::vector<float> values = testing::ReadF32(dir + "/" + b.file);
    ASSERT_EQ(static_cast<int64_t>(values.size()), owned.back()->count()) << b.file;
    std::copy(values.begin(), values.end(), owned.back()->mutable_cpu_data<float>());
    bottom.push_back(owned.back().get());
  }
  for (size_t i = 0; i < tops.size(); ++i) {
    owned.push_back(std::make_unique<Blob>());
    top.push_back(owned.back().get());
  }
  layer->SetUp(bottom, top);
  layer->Forward(bottom, top);
  for (size_t i = 0; i < tops.size(); ++i) ExpectNearZoo(*top[i], dir + "/" + tops[i], false);
  for (size_t i = 0; i < top_diffs.size(); ++i) {
    const std::vector<float> diff = testing::ReadF32(dir + "/" + top_diffs[i]);
    ASSERT_EQ(static_cast<int64_t>(diff.size()), top[i]->count()) << top_diffs[i];
    std::copy(diff.begin(), diff.end(), top[i]->mutable_cpu_diff<float>());
  }
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  std::vector<bool> propagate_down;
  for (size_t i = 0; i < bottom.size(); ++i)
    propagate_down.push_back(i < bottom_diffs.size() && !bottom_diffs[i].empty());
  layer->Backward(top, propagate_down, bottom);
  for (size_t i = 0; i < bottom.size(); ++i)
    if (propagate_down[i]) ExpectNearZoo(*bottom[i], dir + "/" + bottom_diffs[i], true);
  ASSERT_EQ(layer->blobs().size(), param_diffs.size());
  for (size_t p = 0; p < param_diffs.size(); ++p)
    ExpectNearZoo(*layer->blobs()[p], dir + "/" + param_diffs[p], true);
}

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
