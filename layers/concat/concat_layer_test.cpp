#include "layers/concat/concat_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Concat, LayerCase("", {{2, 3, 4, 2}, {2, 5, 4, 2}}).Name("channels"),
    LayerCase("concat_param { axis: 0 }", {{2, 3, 2}, {1, 3, 2}, {3, 3, 2}}).Name("axis0"),
    LayerCase("concat_param { axis: -1 }", {{2, 3, 1}, {2, 3, 4}}).Name("last_axis"),
    LayerCase("concat_param { concat_dim: 2 }", {{2, 2, 3}, {2, 2, 2}}).Name("legacy_concat_dim"),
    LayerCase("", {{2, 3, 4}}).Name("one_bottom"));

namespace crema::testing {
namespace {

// Concatenation by index arithmetic, in double.
std::vector<double> NaiveConcat(const std::vector<Blob*>& bottoms, int axis) {
  const int64_t outer = bottoms[0]->count(0, axis), inner = bottoms[0]->count(axis + 1);
  std::vector<double> out;
  for (int64_t n = 0; n < outer; ++n)
    for (Blob* b : bottoms)
      for (int64_t j = 0; j < b->shape(axis) * inner; ++j)
        out.push_back(b->data_at(n * b->shape(axis) * inner + j));
  return out;
}

TEST(ConcatValues, MatchNaive) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (int axis : {0, 1, 2}) {
      auto layer = CreateLayer(StrCat("type: 'Concat' concat_param { axis: ", axis, " }"), dtype);
      std::vector<int> s0 = {2, 3, 4}, s1 = {2, 3, 4};
      s1[axis] = 1 + axis;
      Blob a(s0, dtype), b(s1, dtype), top(dtype);
      FillUniform(&a, -1, 1, 1);
      FillUniform(&b, -1, 1, 2);
      layer->SetUp({&a, &b}, {&top});
      layer->Forward({&a, &b}, {&top});
      std::vector<int> expected_shape = s0;
      expected_shape[axis] += s1[axis];
      EXPECT_EQ(top.shape(), expected_shape);
      EXPECT_EQ(DataOf(top), NaiveConcat({&a, &b}, axis)) << axis;
      // Backward: each bottom gets its slab of the top diff.
      std::vector<double> dy(top.count());
      for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<double>(i);
      SetDiffOf(&top, dy);
      layer->Backward({&top}, {true, true}, {&a, &b});
      Blob diffs_a(s0, DataType::kFloat64), diffs_b(s1, DataType::kFloat64);
      for (int64_t i = 0; i < a.count(); ++i) diffs_a.mutable_cpu_data<double>()[i] = a.diff_at(i);
      for (int64_t i = 0; i < b.count(); ++i) diffs_b.mutable_cpu_data<double>()[i] = b.diff_at(i);
      EXPECT_EQ(NaiveConcat({&diffs_a, &diffs_b}, axis), dy) << axis;
    }
  }
}

TEST(ConcatValues, ByHand) {
  auto layer = CreateLayer("type: 'Concat'");
  auto a = MakeBlob({2, 1}, {1, 2});
  auto b = MakeBlob({2, 2}, {3, 4, 5, 6});
  Blob top(DataType::kFloat64);
  layer->SetUp({a.get(), b.get()}, {&top});
  layer->Forward({a.get(), b.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, 3, 4, 2, 5, 6}));
  SetDiffOf(&top, {10, 20, 30, 40, 50, 60});
  SetDiffOf(b.get(), {7, 7, 7, 7});
  layer->Backward({&top}, {true, false}, {a.get(), b.get()});
  EXPECT_EQ(DiffOf(*a), (std::vector<double>{10, 40}));
  EXPECT_EQ(DiffOf(*b), (std::vector<double>{7, 7, 7, 7}));  // propagate_down false
}

TEST(ConcatValues, OneBottomSharesDataAndDiff) {
  auto layer = CreateLayer("type: 'Concat'");
  auto a = MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  Blob top(DataType::kFloat64);
  layer->SetUp({a.get()}, {&top});
  layer->Forward({a.get()}, {&top});
  EXPECT_EQ(DataOf(top), DataOf(*a));
  SetDiffOf(&top, {6, 5, 4, 3, 2, 1});
  layer->Backward({&top}, {true}, {a.get()});
  EXPECT_EQ(DiffOf(*a), (std::vector<double>{6, 5, 4, 3, 2, 1}));
}

void ExpectError(const std::string& param, const std::vector<std::vector<int>>& shapes,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Concat' " + param);
  std::vector<std::unique_ptr<Blob>> blobs;
  BlobVec bottom;
  for (const auto& s : shapes) {
    blobs.push_back(MakeBlob(s, {}));
    bottom.push_back(blobs.back().get());
  }
  Blob top;
  try {
    layer->SetUp(bottom, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Concat)"), std::string::npos) << e.what();
  }
}

TEST(ConcatErrors, Messages) {
  ExpectError("concat_param { axis: 1 concat_dim: 1 }", {{2, 3}, {2, 3}},
              "concat_param.concat_dim");
  ExpectError("concat_param { axis: 2 }", {{2, 3}, {2, 3}}, "concat_param.axis");
  ExpectError("concat_param { axis: -3 }", {{2, 3}, {2, 3}}, "concat_param.axis");
  ExpectError("concat_param { concat_dim: 2 }", {{2, 3}, {2, 3}}, "concat_param.concat_dim");
  ExpectError("", {{2, 3}, {3, 3}}, "same shape except on the concat axis");
  ExpectError("", {{2, 3}, {2, 3, 1}}, "same number of axes");
  auto layer = CreateLayer("type: 'Concat'");
  auto a = MakeBlob({2, 3}, {});
  EXPECT_THROW(layer->SetUp({a.get()}, {a.get()}), ConfigError);
  EXPECT_THROW(layer->SetUp({}, {a.get()}), ConfigError);
}

TEST(ConcatCaffe, LayerZoo) {
  for (const char* name : {"concat", "concat0", "side_concat", "head_concat"})
    CheckLayerAgainstCaffe("layer_zoo", name);
}

// The ReLU fused into its Backward (Layer::set_fused_relu_backward), on a bottom in the middle of
// a channel concatenation and on the first of one along the height.
TEST(ConcatValues, FusedReLUBackward) {
  ExpectFusedReLUBackward("type: 'Concat'", {{2, 3, 4, 5}, {2, 2, 4, 5}, {2, 1, 4, 5}}, 1, 1);
  ExpectFusedReLUBackward("type: 'Concat' concat_param { axis: 2 }", {{2, 3, 2, 5}, {2, 3, 4, 5}},
                          1, 0);
}

}  // namespace
}  // namespace crema::testing
