#include "layers/input/input_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"

CREMA_LAYER_CONFORMANCE(
    Input, LayerCase("input_param { shape { dim: 2 dim: 3 dim: 4 dim: 5 } }", {}),
    LayerCase("input_param { shape { dim: 2 dim: 3 } }", {}).Tops(2),
    LayerCase("input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } }", {}).Tops(2),
    LayerCase("input_param { shape { dim: 7 } }", {}).Phase(TEST));

namespace crema::testing {
namespace {

TEST(InputLayer, ShapesFromParam) {
  auto layer = CreateLayer(
      "type: 'Input' input_param { shape { dim: 64 dim: 1 dim: 28 dim: 28 } shape { dim: 64 } }");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{64, 1, 28, 28}));
  EXPECT_EQ(label.shape(), (std::vector<int>{64}));
  EXPECT_EQ(data.dtype(), DataType::kFloat64);

  auto shared = CreateLayer("type: 'Input' input_param { shape { dim: 3 dim: 2 } }");
  Blob a, b, c;
  shared->SetUp({}, {&a, &b, &c});
  for (Blob* t : {&a, &b, &c}) EXPECT_EQ(t->shape(), (std::vector<int>{3, 2}));
}

TEST(InputLayer, ForwardKeepsUserDataAndShape) {
  auto layer = CreateLayer("type: 'Input' input_param { shape { dim: 2 dim: 2 } }");
  Blob data;
  layer->SetUp({}, {&data});
  data.Reshape(std::vector<int>{3});  // the user feeds a different batch
  double* values = data.mutable_cpu_data<double>();
  values[0] = 1, values[1] = 2, values[2] = 3;
  EXPECT_EQ(layer->Forward({}, {&data}), 0.0);
  EXPECT_EQ(data.shape(), std::vector<int>{3});
  EXPECT_EQ(DataOf(data), (std::vector<double>{1, 2, 3}));
}

TEST(InputLayer, NoShapeLeavesTops) {
  auto layer = CreateLayer("type: 'Input'");
  Blob data(std::vector<int>{4, 5}, DataType::kFloat64);
  layer->SetUp({}, {&data});
  EXPECT_EQ(data.shape(), (std::vector<int>{4, 5}));
}

TEST(InputLayer, ShapeCountMismatchIsConfigError) {
  auto layer = CreateLayer("type: 'Input' input_param { shape { dim: 1 } shape { dim: 2 } }");
  Blob a, b, c;
  try {
    layer->SetUp({}, {&a, &b, &c});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("input_param.shape"), std::string::npos) << e.what();
  }
}

TEST(InputLayer, BottomsAndNegativeDimsAreConfigErrors) {
  auto layer = CreateLayer("type: 'Input' input_param { shape { dim: 2 } }");
  auto bottom = MakeBlob({2}, {});
  Blob top;
  EXPECT_THROW(layer->SetUp({bottom.get()}, {&top}), ConfigError);
  auto negative = CreateLayer("type: 'Input' input_param { shape { dim: 2 dim: -1 } }");
  EXPECT_THROW(negative->SetUp({}, {&top}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
