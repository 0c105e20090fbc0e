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
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    MultinomialLogisticLoss, LayerCase("", {{4, 5}, {4}}).Integer(1, 5).Range(0.05, 1),
    LayerCase("", {{3, 2, 2, 2}, {3, 1, 1, 1}}).Integer(1, 8).Range(0.05, 1).Name("nchw"),
    LayerCase("loss_weight: 0.25", {{6, 3}, {6}}).Integer(1, 3).Range(0.2, 0.9).Name("weighted"));

namespace crema {
namespace {

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

TEST(MultinomialLogisticLossCaffe, MatchesLayerZoo) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  CheckLayerZoo(dir, "loss_multinomial",
                {{"fwd/130_scores_prob__top0_scores_prob.f32", {2, 10}}, {"inputs/label.f32", {2}}},
                {"fwd/142_loss_multinomial__top0_loss_multinomial.f32"}, {},
                {"bwd/142_loss_multinomial__bottom0_scores_prob.f32", ""}, {});
}

}  // namespace
}  // namespace crema
