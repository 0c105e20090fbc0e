#include "layers/split/split_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(Split, LayerCase("", {{2, 3, 4, 5}}), LayerCase("", {{2, 3, 4, 5}}).Tops(2),
                        LayerCase("", {{6, 5}}).Tops(3), LayerCase("", {{7}}).Tops(4));

namespace crema::testing {
namespace {

TEST(SplitLayer, TopsShareDataAndBackwardSums) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'Split'", dtype);
    auto bottom = MakeBlob({2, 2}, {1, 2, 3, 4}, dtype);
    Blob a, b, c;
    layer->SetUp({bottom.get()}, {&a, &b, &c});
    layer->Forward({bottom.get()}, {&a, &b, &c});
    for (Blob* t : {&a, &b, &c}) {
      EXPECT_EQ(t->shape(), bottom->shape());
      EXPECT_EQ(DataOf(*t), DataOf(*bottom));
    }
    SetDiffOf(&a, {1, 0, 0, 2});
    SetDiffOf(&b, {10, 20, 0, 0});
    SetDiffOf(&c, {100, 0, 300, 0});
    layer->Backward({&a, &b, &c}, {true}, {bottom.get()});
    EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{111, 20, 300, 2}));
    // One top copies its diff.
    auto single = CreateLayer("type: 'Split'", dtype);
    single->SetUp({bottom.get()}, {&a});
    single->Forward({bottom.get()}, {&a});
    SetDiffOf(&a, {5, 6, 7, 8});
    single->Backward({&a}, {true}, {bottom.get()});
    EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{5, 6, 7, 8}));
  }
}

TEST(SplitLayer, InPlaceIsConfigError) {
  auto layer = CreateLayer("type: 'Split'");
  auto bottom = MakeBlob({2}, {1, 2});
  Blob other;
  EXPECT_THROW(layer->SetUp({bottom.get()}, {&other, bottom.get()}), ConfigError);
}

// The ReLU fused into its Backward (Layer::set_fused_relu_backward): one top, two, three; a count
// of several 8192-element chunks and a partial one.
TEST(SplitLayer, FusedReLUBackward) {
  for (int tops : {1, 2, 3}) ExpectFusedReLUBackward("type: 'Split'", {{3, 5, 7}}, tops, 0);
  ExpectFusedReLUBackward("type: 'Split'", {{4, 3, 61, 67}}, 2, 0);
}

}  // namespace
}  // namespace crema::testing
