#include "layers/normalize/normalize_layer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Normalize, LayerCase("", {{2, 3, 2, 3}}).Name("across_shared"),
    LayerCase("norm_param { across_spatial: false }", {{2, 3, 2, 3}}).Name("spatial_shared"),
    LayerCase("norm_param { channel_shared: false scale_filler { type: 'uniform' min: 0.5 max: 2 "
              "} }",
              {{2, 3, 2, 3}})
        .Name("across_per_channel"),
    LayerCase("norm_param { across_spatial: false channel_shared: false scale_filler { type: "
              "'gaussian' mean: 1 std: 0.5 } }",
              {{2, 4, 3, 2}})
        .Name("spatial_per_channel"),
    LayerCase("norm_param { across_spatial: false eps: 0.1 scale_filler { type: 'constant' value: "
              "20 } }",
              {{3, 5}})
        .Name("two_axes_eps"),
    LayerCase("norm_param { channel_shared: false eps: 0.5 }", {{2, 3, 4}}).Name("three_axes"));

namespace crema::testing {
namespace {

void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance) << what << " [" << i << "]";
}

// Channels (1, 2) and (2, 4) of one item: across_spatial norm sqrt(25) = 5.
TEST(NormalizeLayer, AcrossSpatialByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'Normalize'", dtype);
    auto bottom = MakeBlob({1, 2, 1, 2}, {1, 2, 2, 4}, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    ASSERT_EQ(layer->blobs().size(), 1u);
    EXPECT_EQ(layer->blobs()[0]->num_axes(), 0);                    // shared: one scalar
    EXPECT_EQ(DataOf(*layer->blobs()[0]), std::vector<double>{1});  // default filler
    CREMA_DISPATCH_FLOAT(dtype, T, layer->blobs()[0]->mutable_cpu_data<T>()[0] = T(2));
    layer->Forward({bottom.get()}, {&top});
    ExpectNear(DataOf(top), {0.4, 0.8, 0.8, 1.6}, 1e-6, "top");
    SetDiffOf(&top, {1, 0, 0, 0});
    SetDiffOf(layer->blobs()[0].get(), {0.5});  // param diffs accumulate
    layer->Backward({&top}, {true}, {bottom.get()});
    // dx = s (dy - x (x . dy) / n^2) / n = 2/5 ([1, 0, 0, 0] - [1, 2, 2, 4] / 25).
    ExpectNear(DiffOf(*bottom), {0.384, -0.032, -0.032, -0.064}, 1e-6, "bottom diff");
    // dscale = sum dy * x / n = 1/5.
    ExpectNear(DiffOf(*layer->blobs()[0]), {0.5 + 0.2}, 1e-6, "scale diff");
  }
}

// Positions (3, 4) and (0, 2) over two channels: norms 5 and 2; scales 2 and 10.
TEST(NormalizeLayer, PerPositionPerChannelByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer(
        "type: 'Normalize' norm_param { across_spatial: false channel_shared: false }", dtype);
    auto bottom = MakeBlob({1, 2, 1, 2}, {3, 0, 4, 2}, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>{2});
    EXPECT_EQ(DataOf(*layer->blobs()[0]), (std::vector<double>{1, 1}));
    CREMA_DISPATCH_FLOAT(dtype, T, {
      T* scale = layer->blobs()[0]->mutable_cpu_data<T>();
      scale[0] = T(2);
      scale[1] = T(10);
    });
    layer->Forward({bottom.get()}, {&top});
    ExpectNear(DataOf(top), {1.2, 0, 8, 10}, 1e-5, "top");
    SetDiffOf(&top, {1, 1, 0, 1});
    layer->blobs()[0]->SetDiffZero();
    layer->Backward({&top}, {true}, {bottom.get()});
    // dx = (s dy - x sum(x s dy) / n^2) / n. Position 0: x (3, 4), s dy (2, 0), sum 6, n 5;
    // position 1: x (0, 2), s dy (2, 10), sum 20, n 2. (SSD's formula would give -0.96 for
    // the third value: it scales after the sum.)
    ExpectNear(DiffOf(*bottom), {0.256, 1, -0.192, 0}, 1e-6, "bottom diff");
    // Channel 0: 1 * 3/5 + 1 * 0/2; channel 1: 0 * 4/5 + 1 * 2/2.
    ExpectNear(DiffOf(*layer->blobs()[0]), {0.6, 1}, 1e-6, "scale diff");
  }
}

// eps sits inside the square root: sqrt(1 + 1 + 2) = 2.
TEST(NormalizeLayer, EpsInsideTheRoot) {
  auto layer = CreateLayer("type: 'Normalize' norm_param { eps: 2 }");
  auto bottom = MakeBlob({1, 2}, {1, -1});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  ExpectNear(DataOf(top), {0.5, -0.5}, 1e-12, "top");
}

// Two items normalized separately; a zero item stays zero thanks to eps.
TEST(NormalizeLayer, EachItemHasItsNorm) {
  auto layer = CreateLayer("type: 'Normalize'");
  auto bottom = MakeBlob({2, 2}, {0, 0, 6, 8});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  ExpectNear(DataOf(top), {0, 0, 0.6, 0.8}, 1e-12, "top");
}

TEST(NormalizeLayer, Errors) {
  ExpectParamError("type: 'Normalize'", {6}, "at least 2 axes");
  ExpectParamError("type: 'Normalize' norm_param { scale_filler { type: 'nonsense' } }", {2, 3},
                   "norm_param.scale_filler");
  ExpectParamError("type: 'Normalize' norm_param { eps: -1 }", {2, 3}, "norm_param.eps");
  // A scale from a file that does not fit channel_shared: false.
  LayerParameter param =
      ParseLayerParam("name: 'bad' type: 'Normalize' norm_param { channel_shared: false }");
  Blob scale(std::vector<int>{4});
  scale.ToProto(param.add_blobs());
  auto layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{2, 3, 2}), top;
  EXPECT_THROW(layer->SetUp({&bottom}, {&top}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
