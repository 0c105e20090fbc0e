#include "layers/batch_reindex/batch_reindex_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(BatchReindex, LayerCase("", {{4, 2, 3}, {6}}).Integer(1, 4).Name("repeats"),
                        LayerCase("", {{3, 5}, {2}}).Integer(1, 3).Name("subset"),
                        LayerCase("", {{3, 2}, {0}}).Integer(1, 3).Name("empty"));

namespace crema::testing {
namespace {

TEST(BatchReindexValues, ByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'BatchReindex'", dtype);
    auto bottom = MakeBlob({3, 2}, {1, 2, 3, 4, 5, 6}, dtype);
    auto index = MakeBlob({5}, {2, 0, 2, 1, 2}, dtype);
    Blob top(dtype);
    layer->SetUp({bottom.get(), index.get()}, {&top});
    EXPECT_EQ(top.shape(), (std::vector<int>{5, 2}));
    layer->Forward({bottom.get(), index.get()}, {&top});
    EXPECT_EQ(DataOf(top), (std::vector<double>{5, 6, 1, 2, 5, 6, 3, 4, 5, 6}));
    SetDiffOf(&top, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    SetDiffOf(bottom.get(), {99, 99, 99, 99, 99, 99});
    layer->Backward({&top}, {true, false}, {bottom.get(), index.get()});
    // Item 2 is picked three times: its gradients add up.
    EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{3, 4, 7, 8, 1 + 5 + 9, 2 + 6 + 10}));
  }
}

TEST(BatchReindexErrors, IndicesAndShapes) {
  auto layer = CreateLayer("name: 'bad' type: 'BatchReindex'");
  EXPECT_TRUE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->AllowForceBackward(1));
  auto bottom = MakeBlob({3, 2}, {1, 2, 3, 4, 5, 6});
  Blob top(DataType::kFloat64);
  for (double bad : {3.0, -1.0, 7.5}) {
    auto index = MakeBlob({2}, {0, bad});
    layer->SetUp({bottom.get(), index.get()}, {&top});
    try {
      layer->Forward({bottom.get(), index.get()}, {&top});
      ADD_FAILURE() << "expected a RuntimeError for index " << bad;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("layer \"bad\" (BatchReindex)"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("outside the batch [0, 3)"), std::string::npos)
          << e.what();
    }
  }
  auto index2d = MakeBlob({2, 1}, {0, 1});
  EXPECT_THROW(layer->SetUp({bottom.get(), index2d.get()}, {&top}), ConfigError);
  auto index = MakeBlob({2}, {0, 1});
  layer->SetUp({bottom.get(), index.get()}, {&top});
  layer->Forward({bottom.get(), index.get()}, {&top});
  EXPECT_THROW(layer->Backward({&top}, {true, true}, {bottom.get(), index.get()}), ConfigError);
}

TEST(BatchReindexCaffe, LayerZooAux) { CheckLayerAgainstCaffe("layer_zoo_aux", "batch_reindex"); }

}  // namespace
}  // namespace crema::testing
