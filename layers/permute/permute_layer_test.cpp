#include "layers/permute/permute_layer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Permute,
    LayerCase("permute_param { order: 0 order: 2 order: 3 order: 1 }", {{2, 3, 4, 5}}).Name("nhwc"),
    LayerCase("", {{2, 3, 4}}).Name("no_order"),
    LayerCase("permute_param { order: 1 }", {{2, 3, 4}}).Name("rest_in_order"),
    LayerCase("permute_param { order: 3 order: 1 }", {{2, 3, 2, 4}}).Name("partial"),
    LayerCase("permute_param { order: 1 order: 0 }", {{5, 3}}).Name("transpose"));

namespace crema::testing {
namespace {

TEST(PermuteLayer, TransposeByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'Permute' permute_param { order: 1 order: 0 }", dtype);
    auto bottom = MakeBlob({2, 3}, {0, 1, 2, 3, 4, 5}, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get()}, {&top});
    EXPECT_EQ(top.shape(), (std::vector<int>{3, 2}));
    layer->Forward({bottom.get()}, {&top});
    EXPECT_EQ(DataOf(top), (std::vector<double>{0, 3, 1, 4, 2, 5}));
    SetDiffOf(&top, {10, 11, 12, 13, 14, 15});
    layer->Backward({&top}, {true}, {bottom.get()});
    EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{10, 12, 14, 11, 13, 15}));
  }
}

// order {2, 0} on (2, 2, 3) is the full order {2, 0, 1}: top[k][i][j] = bottom[i][j][k].
TEST(PermuteLayer, UnnamedAxesKeepTheirOrder) {
  auto layer = CreateLayer("type: 'Permute' permute_param { order: 2 order: 0 }");
  std::vector<double> x(12);
  for (int i = 0; i < 12; ++i) x[i] = i;
  auto bottom = MakeBlob({2, 2, 3}, x);
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{3, 2, 2}));
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  SetDiffOf(&top, x);
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(PermuteLayer, IdentityCopies) {
  auto layer = CreateLayer("type: 'Permute' permute_param { order: 0 order: 1 }");
  auto bottom = MakeBlob({2, 2}, {1, -2, 3, -4});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, -2, 3, -4}));
  SetDiffOf(&top, {5, 6, 7, 8});
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{5, 6, 7, 8}));
}

TEST(PermuteLayer, Errors) {
  ExpectParamError("type: 'Permute' permute_param { order: 3 }", {2, 3, 4}, "permute_param.order");
  ExpectParamError("type: 'Permute' permute_param { order: 0 order: 2 order: 0 }", {2, 3, 4},
                   "permute_param.order");
  ExpectParamError("type: 'Permute' permute_param { order: 1 order: 1 }", {2, 3, 4}, "twice");
  ExpectParamError("type: 'Permute' permute_param { order: 5 }", {2, 3}, "< 2");
}

}  // namespace
}  // namespace crema::testing
