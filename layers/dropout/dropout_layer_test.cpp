#include "layers/dropout/dropout_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Dropout, LayerCase("", {{2, 3, 4, 5}}).Eltwise(),
    LayerCase("dropout_param { dropout_ratio: 0.3 }", {{2, 3, 4, 5}}).Eltwise(),
    LayerCase("dropout_param { dropout_ratio: 0.3 }", {{4, 5}}).Name("sampled"),
    LayerCase("dropout_param { dropout_ratio: 0 }", {{3, 4}}).Eltwise(),
    LayerCase("", {{2, 3, 4, 5}}).Phase(TEST).Eltwise(),
    LayerCase("dropout_param { dropout_ratio: 0.8 }", {{6, 7}}).Phase(TEST).Eltwise());

namespace crema::testing {
namespace {

class DropoutValues : public ::testing::TestWithParam<DataType> {};

TEST_P(DropoutValues, TrainMasksAndScales) {
  const double ratio = 0.3;
  auto layer = CreateLayer(StrCat("type: 'Dropout' dropout_param { dropout_ratio: ", ratio, " }"),
                           GetParam());
  Blob values({100, 100}, DataType::kFloat64);
  FillUniform(&values, 0.5, 1.5);
  auto bottom = MakeBlob({100, 100}, DataOf(values), GetParam());
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  SetRandomSeed(3);
  layer->Forward({bottom.get()}, {&top});
  const auto& mask = static_cast<DropoutLayer*>(layer.get())->mask();
  ASSERT_EQ(static_cast<int64_t>(mask.size()), bottom->count());
  const double scale = 1 / (1 - ratio);
  int64_t dropped = 0;
  for (int64_t i = 0; i < bottom->count(); ++i) {
    ASSERT_TRUE(mask[i] == 0 || mask[i] == 1);
    dropped += mask[i] == 0;
    EXPECT_NEAR(top.data_at(i), mask[i] ? bottom->data_at(i) * scale : 0.0, 1e-6) << i;
  }
  // 10000 draws: the dropped fraction is within 5 standard deviations (0.023) of the ratio.
  EXPECT_NEAR(static_cast<double>(dropped) / bottom->count(), ratio, 0.023);
  std::vector<double> dy(bottom->count(), 2.0);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true}, {bottom.get()});
  for (int64_t i = 0; i < bottom->count(); ++i)
    EXPECT_NEAR(bottom->diff_at(i), mask[i] ? 2.0 * scale : 0.0, 1e-6) << i;
}

TEST_P(DropoutValues, TestPhaseIsIdentity) {
  auto layer =
      CreateLayer("type: 'Dropout' phase: TEST dropout_param { dropout_ratio: 0.6 }", GetParam());
  auto bottom = MakeBlob({2, 3}, {1, -2, 3, -4, 5, -6}, GetParam());
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), DataOf(*bottom));
  SetDiffOf(&top, {1, 2, 3, 4, 5, 6});
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

INSTANTIATE_TEST_SUITE_P(Types, DropoutValues,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64));

TEST(DropoutLayer, SameSeedSameMaskNewDrawEachForward) {
  auto layer = CreateLayer("type: 'Dropout'");
  auto bottom = MakeBlob({1000}, std::vector<double>(1000, 1.0));
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  SetRandomSeed(5);
  layer->Forward({bottom.get()}, {&top});
  const std::vector<double> first = DataOf(top);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_NE(DataOf(top), first);
  SetRandomSeed(5);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), first);
}

TEST(DropoutLayer, ZeroRatioKeepsEverything) {
  auto layer = CreateLayer("type: 'Dropout' dropout_param { dropout_ratio: 0 }");
  auto bottom = MakeBlob({4}, {1, 2, 3, 4});
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), DataOf(*bottom));
}

TEST(DropoutLayer, RatioOutsideRangeIsConfigError) {
  for (double ratio : {1.0, -0.1, 1.5}) {
    auto layer =
        CreateLayer(StrCat("type: 'Dropout' dropout_param { dropout_ratio: ", ratio, " }"));
    auto bottom = MakeBlob({4}, {});
    Blob top;
    EXPECT_THROW(layer->SetUp({bottom.get()}, {&top}), ConfigError) << ratio;
  }
}

}  // namespace
}  // namespace crema::testing

namespace crema {
namespace {

TEST(DropoutScaleTrain, FalseScalesAtTestTime) {
  LayerParameter param = testing::ParseLayerParam(
      "type: 'Dropout' dropout_param { dropout_ratio: 0.25 scale_train: false }");
  param.set_phase(TEST);
  auto layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{2, 3});
  Blob top;
  for (int i = 0; i < 6; ++i) bottom.mutable_cpu_data<float>()[i] = i + 1.0f;
  layer->SetUp({&bottom}, {&top});
  layer->Forward({&bottom}, {&top});
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(top.cpu_data<float>()[i], (i + 1.0f) * 0.75f);
}

}  // namespace
}  // namespace crema
