#include "layers/prelu/prelu_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    PReLU, LayerCase("", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
    LayerCase("prelu_param { channel_shared: true }", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
    LayerCase("prelu_param { filler { type: 'uniform' min: -0.5 max: 1.5 } }", {{3, 4, 2, 3}})
        .Kink(0.0)
        .Name("uniform_filler"),
    LayerCase("prelu_param { filler { type: 'gaussian' std: 0.3 } }", {{5, 4}})
        .Kink(0.0)
        .Eltwise()
        .Name("two_axes"),
    LayerCase("prelu_param { channel_shared: true filler { type: 'constant' value: -0.7 } }",
              {{2, 2, 3}})
        .Kink(0.0)
        .Eltwise()
        .Name("shared_three_axes"),
    LayerCase("", {{2, 3, 4, 5}}).Kink(0.0).NoGradient(0).Name("slopes_only"),
    LayerCase("prelu_param { channel_shared: true }", {{3, 2, 40, 50}})
        .Kink(0.0)
        .MaxChecks(40)
        .Name("shared_large"));

namespace crema::testing {
namespace {

// Per-channel slopes 0.5 and -0.1 on a (2, 2, 2) bottom.
TEST(PReLULayer, ForwardAndBackwardMatchHandComputed) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'PReLU'", dtype);
    auto bottom = MakeBlob({2, 2, 2}, {-2, 3, -1, 0, 4, -0.5, 0.25, -6}, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    ASSERT_EQ(layer->blobs().size(), 1u);
    EXPECT_EQ(layer->blobs()[0]->shape(), std::vector<int>{2});
    EXPECT_EQ(DataOf(*layer->blobs()[0]), (std::vector<double>{0.25, 0.25}));  // default filler
    CREMA_DISPATCH_FLOAT(dtype, T, {
      T* slope = layer->blobs()[0]->mutable_cpu_data<T>();
      slope[0] = T(0.5);
      slope[1] = T(-0.1);
    });
    layer->Forward({bottom.get()}, {&top});
    const std::vector<double> y = DataOf(top);
    const std::vector<double> expected_y = {-1, 3, 0.1, 0, 4, -0.25, 0.25, 0.6};
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected_y[i], 1e-6) << i;
    SetDiffOf(&top, {1, 2, 3, 4, 5, 6, 7, 8});
    SetDiffOf(layer->blobs()[0].get(), {10, 20});  // param diffs accumulate
    layer->Backward({&top}, {true}, {bottom.get()});
    const std::vector<double> dx = DiffOf(*bottom);
    // x <= 0 takes the slope (x = 0 included, as Caffe).
    const std::vector<double> expected_dx = {0.5, 2, -0.3, -0.4, 5, 3, 7, -0.8};
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], expected_dx[i], 1e-6) << i;
    // Channel 0: 1 * -2 + 6 * -0.5 = -5; channel 1: 3 * -1 + 4 * 0 + 8 * -6 = -51.
    const std::vector<double> da = DiffOf(*layer->blobs()[0]);
    EXPECT_NEAR(da[0], 10 - 5, 1e-6);
    EXPECT_NEAR(da[1], 20 - 51, 1e-5);
  }
}

TEST(PReLULayer, ChannelSharedHasOneScalarSlope) {
  auto layer = CreateLayer("type: 'PReLU' prelu_param { channel_shared: true }");
  auto bottom = MakeBlob({1, 3, 1}, {-1, -2, 2});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(layer->blobs()[0]->num_axes(), 0);  // Caffe's shape () blob
  EXPECT_EQ(layer->blobs()[0]->count(), 1);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{-0.25, -0.5, 2}));
  SetDiffOf(&top, {1, 1, 1});
  layer->blobs()[0]->SetDiffZero();
  layer->Backward({&top}, {false}, {bottom.get()});
  EXPECT_EQ(DiffOf(*layer->blobs()[0]), std::vector<double>{-3});
}

TEST(PReLULayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'PReLU'");
  auto blob = MakeBlob({1, 1, 3}, {-4, 0.5, -1});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  EXPECT_EQ(DataOf(*blob), (std::vector<double>{-1, 0.5, -0.25}));
  SetDiffOf(blob.get(), {1, 1, 2});
  layer->blobs()[0]->SetDiffZero();
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{0.25, 1, 0.5}));
  EXPECT_EQ(DiffOf(*layer->blobs()[0]), std::vector<double>{-6});
}

// Without param_propagate_down the slope diff is left alone.
void CheckFrozenSlopesKeepTheirDiff(const Device& device) {
  auto layer = CreateLayer("type: 'PReLU'");
  layer->set_device(device);
  auto bottom = MakeBlob({1, 2, 2}, {-1, 2, -3, 4});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(&top, {1, 1, 1, 1});
  SetDiffOf(layer->blobs()[0].get(), {7, 8});
  layer->set_param_propagate_down(0, false);
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*layer->blobs()[0]), (std::vector<double>{7, 8}));
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{0.25, 1, 0.25, 1}));
}

TEST(PReLULayer, FrozenSlopesKeepTheirDiffOnTheCpu) {
  CheckFrozenSlopesKeepTheirDiff(Device::Cpu());
}

TEST(PReLULayer, FrozenSlopesKeepTheirDiffOnTheGpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  SetCudaDevice(0);
  CheckFrozenSlopesKeepTheirDiff(Device::Cuda(0));
}

TEST(PReLULayer, Errors) {
  ExpectParamError("type: 'PReLU'", {6}, "at least 2 axes");
  ExpectParamError("type: 'PReLU' prelu_param { filler { type: 'nonsense' } }", {2, 3},
                   "prelu_param.filler");
  // Slopes from a file that do not fit the channels.
  LayerParameter param = ParseLayerParam("name: 'bad' type: 'PReLU'");
  Blob slopes(std::vector<int>{4});
  slopes.ToProto(param.add_blobs());
  auto layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{2, 3, 2}), top;
  try {
    layer->SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "negative slopes shape mismatch: expected 3 values (3), got (4) (one per "
                  "channel of the bottom)"),
              std::string::npos)
        << e.what();
  }
  // A later bottom with another channel count.
  auto ok = CreateLayer("type: 'PReLU'");
  Blob b(std::vector<int>{2, 3, 2}, DataType::kFloat64), t(DataType::kFloat64);
  ok->SetUp({&b}, {&t});
  b.Reshape({2, 4, 2});
  EXPECT_THROW(ok->Reshape({&b}, {&t}), ConfigError);
}

TEST(PReLULayer, SlopesFromAFileAreKept) {
  LayerParameter param = ParseLayerParam("name: 'p' type: 'PReLU'");
  auto slopes = MakeBlob({2}, {0.5, -2}, DataType::kFloat32);
  slopes->ToProto(param.add_blobs());
  auto layer = LayerRegistry::Create(param);
  layer->set_dtype(DataType::kFloat64);
  auto bottom = MakeBlob({1, 2, 1}, {-1, -1});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(layer->blobs()[0]->dtype(), DataType::kFloat64);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{-0.5, 2}));
}

TEST(PReLULayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "prelu",
                      {2, 3, 4, 7},
                      "fwd/015_conv_rect__top0_conv_rect.f32",
                      "fwd/024_prelu__top0_prelu.f32",
                      "bwd/025_prelu_prelu_0_split__bottom0_prelu.f32",
                      "bwd/024_prelu__bottom0_conv_rect_conv_rect_0_split_0.f32",
                      {"grad/024_prelu__param0.f32"}});
}

TEST(PReLULayer, ChannelSharedMatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "prelu_shared",
                      {2, 3, 8, 8},
                      "fwd/017_deconv__top0_deconv.f32",
                      "fwd/026_prelu_shared__top0_prelu_shared.f32",
                      "bwd/110_side_f6__bottom0_prelu_shared.f32",
                      "bwd/026_prelu_shared__bottom0_deconv_deconv_0_split_0.f32",
                      {"grad/026_prelu_shared__param0.f32"}});
}

}  // namespace
}  // namespace crema::testing
