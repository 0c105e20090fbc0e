#include "layers/slice/slice_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Slice, LayerCase("", {{2, 6, 3}}).Tops(2).Name("equal_channels"),
    LayerCase("slice_param { axis: 0 slice_point: 1 slice_point: 3 }", {{4, 2, 3}})
        .Tops(3)
        .Name("points_axis0"),
    LayerCase("slice_param { axis: -1 slice_point: 2 }", {{2, 3, 5}}).Tops(2).Name("last_axis"),
    LayerCase("slice_param { slice_dim: 2 }", {{2, 3, 6}}).Tops(3).Name("legacy_slice_dim"),
    LayerCase("", {{2, 3}}).Name("one_top"));

namespace crema::testing {
namespace {

std::vector<std::unique_ptr<Blob>> MakeTops(int n) {
  std::vector<std::unique_ptr<Blob>> tops;
  for (int i = 0; i < n; ++i) tops.push_back(std::make_unique<Blob>(DataType::kFloat64));
  return tops;
}

BlobVec Ptrs(const std::vector<std::unique_ptr<Blob>>& blobs) {
  BlobVec v;
  for (const auto& b : blobs) v.push_back(b.get());
  return v;
}

TEST(SliceValues, ByHand) {
  // (2, 5): columns [0, 1) [1, 4) [4, 5).
  auto layer = CreateLayer("type: 'Slice' slice_param { slice_point: 1 slice_point: 4 }");
  auto bottom = MakeBlob({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto tops = MakeTops(3);
  layer->SetUp({bottom.get()}, Ptrs(tops));
  layer->Forward({bottom.get()}, Ptrs(tops));
  EXPECT_EQ(tops[0]->shape(), (std::vector<int>{2, 1}));
  EXPECT_EQ(tops[1]->shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(tops[2]->shape(), (std::vector<int>{2, 1}));
  EXPECT_EQ(DataOf(*tops[0]), (std::vector<double>{0, 5}));
  EXPECT_EQ(DataOf(*tops[1]), (std::vector<double>{1, 2, 3, 6, 7, 8}));
  EXPECT_EQ(DataOf(*tops[2]), (std::vector<double>{4, 9}));
  SetDiffOf(tops[0].get(), {-1, -2});
  SetDiffOf(tops[1].get(), {10, 20, 30, 40, 50, 60});
  SetDiffOf(tops[2].get(), {100, 200});
  layer->Backward(Ptrs(tops), {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), (std::vector<double>{-1, 10, 20, 30, 100, -2, 40, 50, 60, 200}));
}

TEST(SliceValues, EqualSplitAxis0) {
  auto layer = CreateLayer("type: 'Slice' slice_param { axis: 0 }", DataType::kFloat32);
  Blob bottom(std::vector<int>{4, 3}, DataType::kFloat32);
  FillUniform(&bottom, -1, 1);
  std::vector<std::unique_ptr<Blob>> tops;
  for (int i = 0; i < 2; ++i) tops.push_back(std::make_unique<Blob>());
  layer->SetUp({&bottom}, Ptrs(tops));
  layer->Forward({&bottom}, Ptrs(tops));
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(tops[t]->shape(), (std::vector<int>{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(tops[t]->data_at(i), bottom.data_at(t * 6 + i));
  }
}

void ExpectError(const std::string& param, const std::vector<int>& shape, int num_tops,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Slice' " + param);
  auto bottom = MakeBlob(shape, {});
  auto tops = MakeTops(num_tops);
  try {
    layer->SetUp({bottom.get()}, Ptrs(tops));
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Slice)"), std::string::npos) << e.what();
  }
}

TEST(SliceErrors, Messages) {
  ExpectError("slice_param { axis: 1 slice_dim: 1 }", {2, 4}, 2, "slice_param.slice_dim");
  ExpectError("slice_param { axis: 2 }", {2, 4}, 2, "slice_param.axis");
  ExpectError("slice_param { slice_dim: 3 }", {2, 4}, 2, "slice_param.slice_dim");
  ExpectError("slice_param { slice_point: 1 }", {2, 4}, 3, "slice_param.slice_point");
  ExpectError("slice_param { slice_point: 2 slice_point: 2 }", {2, 4}, 3,
              "slice_param.slice_point");
  ExpectError("slice_param { slice_point: 0 }", {2, 4}, 2, "slice_param.slice_point");
  ExpectError("slice_param { slice_point: 5 }", {2, 4}, 2, "slice_param.slice_point");
  ExpectError("", {2, 5}, 2, "must divide");
  auto layer = CreateLayer("type: 'Slice'");
  auto bottom = MakeBlob({2, 4}, {});
  EXPECT_THROW(layer->SetUp({bottom.get()}, {bottom.get()}), ConfigError);
}

TEST(SliceCaffe, LayerZoo) {
  for (const char* name : {"slice", "lstm_last", "cont_slice"})
    CheckLayerAgainstCaffe("layer_zoo", name);
}

}  // namespace
}  // namespace crema::testing
