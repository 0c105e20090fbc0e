#include "layers/reshape/reshape_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(
    Reshape, LayerCase("reshape_param { shape { dim: 0 dim: -1 } }", {{2, 3, 4}}).Name("flatten"),
    LayerCase("reshape_param { shape { dim: 6 dim: 2 dim: 2 } }", {{2, 3, 4}}).Name("explicit"),
    LayerCase("reshape_param { shape { dim: 2 dim: 2 } axis: 1 num_axes: 1 }", {{2, 4, 3}})
        .Name("axis_num_axes"),
    LayerCase("reshape_param { shape { dim: 1 } axis: -1 num_axes: 0 }", {{2, 3}})
        .Name("append_axis"));

namespace crema::testing {
namespace {

struct ShapeCase {
  std::string param;
  std::vector<int> bottom;
  std::vector<int> top;
};

class ReshapeShapes : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(ReshapeShapes, TopShapeSharesMemory) {
  const ShapeCase& c = GetParam();
  auto layer = CreateLayer("type: 'Reshape' reshape_param { " + c.param + " }");
  Blob values(c.bottom, DataType::kFloat64);
  FillUniform(&values, -1, 1);
  auto bottom = MakeBlob(c.bottom, DataOf(values));
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), c.top);
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(DataOf(top), DataOf(*bottom));
  EXPECT_EQ(top.data(), bottom->data());
  EXPECT_EQ(top.diff(), bottom->diff());
  std::vector<double> dy(top.count());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<double>(i);
  SetDiffOf(&top, dy);
  layer->Backward({&top}, {true}, {bottom.get()});
  EXPECT_EQ(DiffOf(*bottom), dy);
}

// Caffe's reshape_layer tests, plus the axis/num_axes forms of its documentation.
INSTANTIATE_TEST_SUITE_P(
    Params, ReshapeShapes,
    ::testing::Values(
        ShapeCase{"shape { dim: 0 dim: -1 }", {2, 3, 6, 5}, {2, 90}},
        ShapeCase{"shape { dim: 0 dim: 2 dim: 3 dim: 0 }", {2, 6, 1, 5}, {2, 2, 3, 5}},
        ShapeCase{"shape { dim: 0 dim: -1 dim: 0 dim: 0 }", {2, 3, 6, 5}, {2, 3, 6, 5}},
        ShapeCase{"shape { dim: -1 dim: 2 }", {2, 3, 6, 5}, {90, 2}},
        ShapeCase{"shape { dim: 1 dim: 1 dim: 1 } axis: 0 num_axes: 0", {2, 3}, {1, 1, 1, 2, 3}},
        ShapeCase{"shape { dim: 1 } axis: 1 num_axes: 0", {2, 3}, {2, 1, 3}},
        ShapeCase{"shape { dim: 1 } axis: -1 num_axes: 0", {2, 3}, {2, 3, 1}},
        ShapeCase{"shape { dim: 3 dim: -1 } axis: 1 num_axes: 2", {2, 3, 6, 5}, {2, 3, 6, 5}},
        ShapeCase{
            "shape { dim: 0 dim: 2 dim: 2 } axis: 1 num_axes: 2", {2, 3, 4, 5}, {2, 3, 2, 2, 5}},
        ShapeCase{"shape { dim: -1 } axis: -3", {2, 3, 4, 5}, {2, 3, 20}},
        ShapeCase{"shape { }", {1, 1}, {}}));

TEST(ReshapeLayer, LaterBottomShapesAreFollowed) {
  auto layer = CreateLayer("type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 } }");
  auto bottom = MakeBlob({2, 3, 4}, {});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 12}));
  bottom->Reshape({5, 2, 2});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{5, 4}));
  EXPECT_EQ(top.data(), bottom->data());
}

void ExpectError(const std::string& param, const std::vector<int>& shape,
                 const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Reshape' reshape_param { " + param + " }");
  auto bottom = MakeBlob(shape, {});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({bottom.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Reshape)"), std::string::npos) << e.what();
  }
}

TEST(ReshapeErrors, Messages) {
  ExpectError("shape { dim: -1 dim: -1 }", {2, 3}, "reshape_param.shape");
  ExpectError("shape { dim: -2 }", {2, 3}, "reshape_param.shape");
  ExpectError("shape { dim: 0 dim: 0 dim: 0 }", {2, 3}, "reshape_param.shape");
  ExpectError("shape { dim: 5 }", {2, 3}, "must keep the element count");
  ExpectError("shape { dim: 4 dim: -1 }", {2, 3}, "divisible");
  ExpectError("shape { dim: 6 } axis: 3", {2, 3}, "reshape_param.axis");
  ExpectError("shape { dim: 6 } axis: -4", {2, 3}, "reshape_param.axis");
  ExpectError("shape { dim: 6 } num_axes: -2", {2, 3}, "reshape_param.num_axes");
  ExpectError("shape { dim: 6 } axis: 1 num_axes: 2", {2, 3}, "reshape_param.num_axes");
  auto layer = CreateLayer("type: 'Reshape' reshape_param { shape { dim: -1 } }");
  auto bottom = MakeBlob({2, 3}, {});
  EXPECT_THROW(layer->SetUp({bottom.get()}, {bottom.get()}), ConfigError);
}

TEST(ReshapeCaffe, LayerZoo) {
  for (const char* name : {"gmax_flat", "reshape", "reshape_mid", "lstm_last_flat", "rnn_flat",
                           "gates_3d", "side_f14", "side_f10", "reduce_asum_2d"})
    CheckLayerAgainstCaffe("layer_zoo", name);
}

}  // namespace
}  // namespace crema::testing
