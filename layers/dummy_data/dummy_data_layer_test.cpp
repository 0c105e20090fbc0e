#include "layers/dummy_data/dummy_data_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    DummyData,
    LayerCase("dummy_data_param { shape { dim: 2 dim: 3 dim: 4 } }", {}).NoGradientCheck(),
    LayerCase(
        "dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 5 } "
        "data_filler { type: 'constant' value: 2 } data_filler { type: 'constant' value: -1 } }",
        {})
        .Tops(2)
        .NoGradientCheck()
        .Name("per_top"),
    LayerCase("dummy_data_param { num: 2 channels: 3 height: 4 width: 5 "
              "data_filler { value: 0.5 } }",
              {})
        .NoGradientCheck()
        .Name("legacy"));
// Random fillers draw differently in float32 and float64, so they are tested below instead.

namespace crema::testing {
namespace {

TEST(DummyDataLayer, ConstantFilledOnceAtSetUp) {
  auto layer = CreateLayer(
      "type: 'DummyData' dummy_data_param { num: 2 channels: 3 height: 4 width: 5 "
      "data_filler { type: 'constant' value: 7 } }");
  Blob top;
  layer->SetUp({}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(DataOf(top), std::vector<double>(120, 7.0));
  // Caffe does not refill constant tops: a change made by a later layer survives Forward.
  top.mutable_cpu_data<double>()[3] = -1;
  layer->Forward({}, {&top});
  EXPECT_EQ(DataOf(top)[3], -1.0);
}

TEST(DummyDataLayer, DefaultIsZerosAndLegacyPerTop) {
  auto layer = CreateLayer(
      "type: 'DummyData' dummy_data_param { num: 5 num: 2 channels: 3 height: 1 width: 4 "
      "width: 6 }");
  Blob a, b;
  layer->SetUp({}, {&a, &b});
  EXPECT_EQ(a.shape(), (std::vector<int>{5, 3, 1, 4}));
  EXPECT_EQ(b.shape(), (std::vector<int>{2, 3, 1, 6}));
  EXPECT_EQ(DataOf(a), std::vector<double>(60, 0.0));
  layer->Forward({}, {&a, &b});
  EXPECT_EQ(DataOf(b), std::vector<double>(36, 0.0));
}

TEST(DummyDataLayer, GaussianRefilledEveryForward) {
  auto layer = CreateLayer(
      "type: 'DummyData' dummy_data_param { shape { dim: 100 dim: 50 } shape { dim: 3 } "
      "data_filler { type: 'gaussian' mean: 3 std: 2 } "
      "data_filler { type: 'constant' value: 1.5 } }");
  Blob g, c;
  SetRandomSeed(5);
  layer->SetUp({}, {&g, &c});
  EXPECT_EQ(g.shape(), (std::vector<int>{100, 50}));
  EXPECT_EQ(DataOf(c), std::vector<double>(3, 1.5));
  layer->Forward({}, {&g, &c});
  const std::vector<double> first = DataOf(g);
  double sum = 0, sq = 0;
  for (double v : first) sum += v, sq += v * v;
  const double mean = sum / first.size(), var = sq / first.size() - mean * mean;
  EXPECT_NEAR(mean, 3.0, 0.1);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.1);
  layer->Forward({}, {&g, &c});
  EXPECT_NE(DataOf(g), first);
  EXPECT_EQ(DataOf(c), std::vector<double>(3, 1.5));
}

TEST(DummyDataLayer, UniformSharedFillerFillsEveryTop) {
  auto layer = CreateLayer(
      "type: 'DummyData' dummy_data_param { shape { dim: 10 dim: 10 } "
      "data_filler { type: 'uniform' min: 2 max: 3 } }");
  Blob a, b;
  layer->SetUp({}, {&a, &b});
  layer->Forward({}, {&a, &b});
  for (Blob* t : {&a, &b})
    for (double v : DataOf(*t)) {
      EXPECT_GE(v, 2.0);
      EXPECT_LE(v, 3.0);
    }
  EXPECT_NE(DataOf(a), DataOf(b));
}

TEST(DummyDataLayer, BadParamsAreConfigErrors) {
  Blob a, b, c;
  auto count =
      CreateLayer("type: 'DummyData' dummy_data_param { shape { dim: 1 } shape { dim: 2 } }");
  EXPECT_THROW(count->SetUp({}, {&a, &b, &c}), ConfigError);
  auto fillers = CreateLayer(
      "type: 'DummyData' dummy_data_param { shape { dim: 1 } data_filler { } data_filler { } }");
  EXPECT_THROW(fillers->SetUp({}, {&a, &b, &c}), ConfigError);
  auto none = CreateLayer("type: 'DummyData'");
  EXPECT_THROW(none->SetUp({}, {&a}), ConfigError);
  auto both = CreateLayer(
      "type: 'DummyData' dummy_data_param { shape { dim: 1 } num: 1 channels: 1 height: 1 "
      "width: 1 }");
  EXPECT_THROW(both->SetUp({}, {&a}), ConfigError);
  auto legacy = CreateLayer("type: 'DummyData' dummy_data_param { num: 1 channels: 1 }");
  EXPECT_THROW(legacy->SetUp({}, {&a}), ConfigError);
  auto unknown = CreateLayer(
      "type: 'DummyData' dummy_data_param { shape { dim: 1 } data_filler { type: 'nope' } }");
  try {
    unknown->SetUp({}, {&a});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::testing
