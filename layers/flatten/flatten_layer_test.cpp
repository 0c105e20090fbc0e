#include "layers/flatten/flatten_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(Flatten, LayerCase("", {{2, 3, 4, 5}}),
                        LayerCase("flatten_param { axis: 2 }", {{2, 3, 4, 5}}),
                        LayerCase("flatten_param { end_axis: -2 }", {{2, 3, 4, 5}}),
                        LayerCase("flatten_param { axis: 0 }", {{2, 3, 4}}),
                        LayerCase("flatten_param { axis: -3 end_axis: 2 }", {{2, 3, 4, 5}}),
                        LayerCase("flatten_param { axis: 1 end_axis: 0 }", {{2, 3}}));

namespace crema::testing {
namespace {

struct FlattenCase {
  std::string param;
  std::vector<int> bottom_shape;
  std::vector<int> top_shape;
};

class FlattenShapes : public ::testing::TestWithParam<FlattenCase> {};

TEST_P(FlattenShapes, TopShapeAndSharedValues) {
  const FlattenCase& fc = GetParam();
  auto layer = CreateLayer("type: 'Flatten' " + fc.param);
  Blob values(fc.bottom_shape, DataType::kFloat64);
  FillUniform(&values, -1, 1);
  auto bottom = MakeBlob(fc.bottom_shape, DataOf(values));
  Blob top;
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), fc.top_shape);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), DataOf(*bottom));
  std::vector<double> dy(top.count());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<double>(i);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), dy);
}

INSTANTIATE_TEST_SUITE_P(
    Params, FlattenShapes,
    ::testing::Values(FlattenCase{"", {2, 3, 4, 5}, {2, 60}},
                      FlattenCase{"flatten_param { axis: 2 }", {2, 3, 4, 5}, {2, 3, 20}},
                      FlattenCase{"flatten_param { end_axis: -2 }", {2, 3, 4, 5}, {2, 12, 5}},
                      FlattenCase{"flatten_param { axis: 0 }", {2, 3, 4}, {24}},
                      FlattenCase{
                          "flatten_param { axis: -3 end_axis: 2 }", {2, 3, 4, 5}, {2, 12, 5}},
                      FlattenCase{"flatten_param { axis: 1 end_axis: 1 }", {2, 3, 4}, {2, 3, 4}},
                      FlattenCase{"flatten_param { axis: 1 end_axis: 0 }", {2, 3}, {2, 1, 3}}));

TEST(FlattenLayer, BadAxesAreConfigErrors) {
  for (const char* param : {"flatten_param { axis: 4 }", "flatten_param { end_axis: -5 }",
                            "flatten_param { axis: 3 end_axis: 1 }"}) {
    auto layer = CreateLayer(StrCat("type: 'Flatten' ", param));
    auto bottom = MakeBlob({2, 3, 4, 5}, {});
    Blob top;
    EXPECT_THROW(layer->SetUp({bottom.get()}, {&top}), ConfigError) << param;
  }
}

TEST(FlattenLayer, InPlaceIsConfigError) {
  auto layer = CreateLayer("type: 'Flatten'");
  auto bottom = MakeBlob({2, 3}, {});
  EXPECT_THROW(layer->SetUp({bottom.get()}, {bottom.get()}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
