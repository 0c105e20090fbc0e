#include "layers/silence/silence_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

// No tops: the gradient of the (empty) objective is zero, which the checker verifies.
CREMA_LAYER_CONFORMANCE(Silence, LayerCase("", {{2, 3}}).Tops(0).Name("one"),
                        LayerCase("", {{2, 3}, {4}, {1, 2, 2}}).Tops(0).Name("three"));

namespace crema::testing {
namespace {

TEST(SilenceLayer, BackwardZeroesRequestedDiffs) {
  auto layer = CreateLayer("type: 'Silence'");
  auto a = MakeBlob({2}, {1, 2});
  auto b = MakeBlob({3}, {1, 2, 3});
  layer->SetUp({a.get(), b.get()}, {});
  layer->Forward({a.get(), b.get()}, {});
  EXPECT_EQ(DataOf(*a), (std::vector<double>{1, 2}));
  SetDiffOf(a.get(), {5, 5});
  SetDiffOf(b.get(), {5, 5, 5});
  layer->Backward({}, {true, false}, {a.get(), b.get()});
  EXPECT_EQ(DiffOf(*a), (std::vector<double>{0, 0}));
  EXPECT_EQ(DiffOf(*b), (std::vector<double>{5, 5, 5}));
}

TEST(SilenceLayer, CountsAreErrors) {
  auto layer = CreateLayer("name: 'bad' type: 'Silence'");
  auto a = MakeBlob({2}, {1, 2});
  Blob top;
  EXPECT_THROW(layer->SetUp({}, {}), ConfigError);
  EXPECT_THROW(layer->SetUp({a.get()}, {&top}), ConfigError);
}

TEST(SilenceCaffe, LayerZoo) { CheckLayerAgainstCaffe("layer_zoo", "silence"); }

}  // namespace
}  // namespace crema::testing
