#include "layers/relu/relu_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    ReLU, LayerCase("", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
    LayerCase("relu_param { negative_slope: 0.1 }", {{2, 3, 4, 5}}).Kink(0.0).Eltwise(),
    LayerCase("relu_param { negative_slope: 0.1 }", {{3, 7}}).Kink(0.0).Name("sampled"),
    LayerCase("relu_param { negative_slope: 2.5 }", {{2, 3}}).Kink(0.0).Eltwise());

namespace crema::testing {
namespace {

class ReLUValues : public ::testing::TestWithParam<DataType> {};

TEST_P(ReLUValues, ForwardAndBackwardMatchHandComputed) {
  for (double slope : {0.0, 0.1}) {
    auto layer =
        CreateLayer(StrCat("type: 'ReLU' relu_param { negative_slope: ", slope, " }"), GetParam());
    auto bottom = MakeBlob({1, 5}, {-2, -0.5, 0, 0.5, 3}, GetParam());
    Blob top;
    layer->SetUp({bottom.get()}, {&top});
    layer->Forward({bottom.get()}, {&top});
    const std::vector<double> expected = {-2 * slope, -0.5 * slope, 0, 0.5, 3};
    const std::vector<double> y = DataOf(top);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-7) << i;
    SetDiffOf(&top, {1, 2, 3, 4, 5});
    layer->Backward({&top}, {true}, {bottom.get()});
    // Caffe's derivative at 0 is the negative slope.
    const std::vector<double> expected_diff = {slope, 2 * slope, 3 * slope, 4, 5};
    const std::vector<double> dx = DiffOf(*bottom);
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], expected_diff[i], 1e-7) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ReLUValues,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64));

TEST(ReLULayer, NoPropagateDownLeavesBottomDiff) {
  auto layer = CreateLayer("type: 'ReLU'");
  auto bottom = MakeBlob({3}, {-1, 1, 2});
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  SetDiffOf(bottom.get(), {7, 7, 7});
  SetDiffOf(&top, {1, 1, 1});
  layer->Backward({&top}, {false}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{7, 7, 7}));
}

}  // namespace
}  // namespace crema::testing
