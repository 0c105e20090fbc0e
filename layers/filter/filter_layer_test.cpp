#include "layers/filter/filter_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

// The conformance inputs are uniform in [-1, 1], so every selector value is non-zero and every
// item passes (the top shapes then stay those of set-up); partial selections are tested below.
CREMA_LAYER_CONFORMANCE(Filter, LayerCase("", {{4, 3}, {4}}).NoGradient(1).Name("one"),
                        LayerCase("bottom: 'a' bottom: 'b' bottom: 'sel'",
                                  {{3, 2, 2}, {3, 4}, {3, 1, 1}})
                            .NoGradient(2)
                            .Tops(2)
                            .Name("two"));

namespace crema::testing {
namespace {

TEST(FilterValues, ByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer("type: 'Filter' bottom: 'x' bottom: 'y' bottom: 's'", dtype);
    EXPECT_TRUE(layer->AllowForceBackward(0));
    EXPECT_TRUE(layer->AllowForceBackward(1));
    EXPECT_FALSE(layer->AllowForceBackward(2));
    auto x = MakeBlob({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, dtype);
    auto y = MakeBlob({4}, {10, 20, 30, 40}, dtype);
    auto selector = MakeBlob({4, 1}, {0, 1, 0, -2}, dtype);
    Blob tx(dtype), ty(dtype);
    const BlobVec bottom = {x.get(), y.get(), selector.get()};
    layer->SetUp(bottom, {&tx, &ty});
    EXPECT_EQ(tx.shape(), (std::vector<int>{4, 2}));  // set-up: the whole batch, as Caffe
    layer->Forward(bottom, {&tx, &ty});
    EXPECT_EQ(tx.shape(), (std::vector<int>{2, 2}));
    EXPECT_EQ(ty.shape(), (std::vector<int>{2}));
    EXPECT_EQ(DataOf(tx), (std::vector<double>{3, 4, 7, 8}));
    EXPECT_EQ(DataOf(ty), (std::vector<double>{20, 40}));
    SetDiffOf(&tx, {-1, -2, -3, -4});
    SetDiffOf(&ty, {5, 6});
    SetDiffOf(x.get(), {9, 9, 9, 9, 9, 9, 9, 9});
    layer->Backward({&tx, &ty}, {true, false, false}, bottom);
    EXPECT_EQ(DiffOf(*x), (std::vector<double>{0, 0, -1, -2, 0, 0, -3, -4}));
    EXPECT_EQ(DiffOf(*y), (std::vector<double>{0, 0, 0, 0}));  // propagate_down false: untouched
    // Nothing selected: empty tops, zero gradients.
    const std::vector<double> none = {0, 0, 0, 0};
    for (int i = 0; i < 4; ++i) {
      CREMA_DISPATCH_FLOAT(dtype, T, selector->mutable_cpu_data<T>()[i] = T(0));
    }
    layer->Forward(bottom, {&tx, &ty});
    EXPECT_EQ(tx.shape(), (std::vector<int>{0, 2}));
    layer->Backward({&tx, &ty}, {true, true, false}, bottom);
    EXPECT_EQ(DiffOf(*y), none);
    EXPECT_EQ(DiffOf(*x), (std::vector<double>(8, 0.0)));
  }
}

void ExpectError(const std::vector<std::vector<int>>& shapes, int num_tops,
                 const std::string& needle) {
  auto layer = CreateLayer("name: 'bad' type: 'Filter'");
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom, top;
  for (const auto& s : shapes) {
    blobs.push_back(MakeBlob(s, {}));
    bottom.push_back(blobs.back().get());
  }
  for (int i = 0; i < num_tops; ++i) {
    blobs.push_back(std::make_unique<Blob>(DataType::kFloat64));
    top.push_back(blobs.back().get());
  }
  try {
    layer->SetUp(bottom, top);
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Filter)"), std::string::npos) << e.what();
  }
}

TEST(FilterErrors, Shapes) {
  ExpectError({{4, 2}, {4}}, 2, "one top per filtered bottom");
  ExpectError({{4, 2}, {4, 2}}, 1, "selector");
  ExpectError({{4, 2}, {3}}, 1, "as many items");
  auto layer = CreateLayer("type: 'Filter'");
  auto x = MakeBlob({2, 2}, {1, 2, 3, 4});
  auto s = MakeBlob({2}, {1, 1});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get(), s.get()}, {&top});
  layer->Forward({x.get(), s.get()}, {&top});
  EXPECT_THROW(layer->Backward({&top}, {true, true}, {x.get(), s.get()}), ConfigError);
  auto in_place = CreateLayer("type: 'Filter'");
  EXPECT_THROW(in_place->SetUp({x.get(), s.get()}, {x.get()}), ConfigError);
}

TEST(FilterCaffe, LayerZooAux) { CheckLayerAgainstCaffe("layer_zoo_aux", "filter"); }

}  // namespace
}  // namespace crema::testing
