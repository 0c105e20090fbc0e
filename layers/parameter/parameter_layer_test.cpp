#include "layers/parameter/parameter_layer.hpp"

#include <gtest/gtest.h>

#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

CREMA_LAYER_CONFORMANCE(Parameter,
                        LayerCase("parameter_param { shape { dim: 2 dim: 3 } }", {}).Name("matrix"),
                        LayerCase("parameter_param { shape { dim: 4 } }", {}).Name("vector"));

namespace crema::testing {
namespace {

TEST(ParameterLayer, ZeroBlobSharedWithTop) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer =
        CreateLayer("type: 'Parameter' parameter_param { shape { dim: 2 dim: 2 } }", dtype);
    EXPECT_EQ(layer->ExactNumBottomBlobs(), 0);
    Blob top(dtype);
    layer->SetUp({}, {&top});
    ASSERT_EQ(layer->blobs().size(), 1u);
    Blob& blob = *layer->blobs()[0];
    EXPECT_EQ(blob.shape(), (std::vector<int>{2, 2}));
    EXPECT_EQ(blob.dtype(), dtype);
    EXPECT_EQ(top.shape(), (std::vector<int>{2, 2}));
    EXPECT_EQ(DataOf(blob), (std::vector<double>{0, 0, 0, 0}));  // as Caffe: no filler
    CREMA_DISPATCH_FLOAT(dtype, T, {
      for (int i = 0; i < 4; ++i) blob.mutable_cpu_data<T>()[i] = static_cast<T>(i + 1);
    });
    layer->Forward({}, {&top});
    EXPECT_EQ(DataOf(top), (std::vector<double>{1, 2, 3, 4}));
    SetDiffOf(&top, {0.5, -1, 2, 3});
    layer->Backward({&top}, {}, {});
    EXPECT_EQ(DiffOf(blob), (std::vector<double>{0.5, -1, 2, 3}));
  }
}

TEST(ParameterLayer, LoadedBlobIsKept) {
  auto layer = CreateLayer(
      "type: 'Parameter' parameter_param { shape { dim: 3 } } "
      "blobs { shape { dim: 3 } data: [1, 2, 3] }");
  Blob top(DataType::kFloat64);
  layer->SetUp({}, {&top});
  EXPECT_EQ(layer->blobs()[0]->dtype(), DataType::kFloat64);
  layer->Forward({}, {&top});
  EXPECT_EQ(DataOf(top), (std::vector<double>{1, 2, 3}));
}

TEST(ParameterErrors, Messages) {
  auto bad = CreateLayer(
      "name: 'bad' type: 'Parameter' parameter_param { shape { dim: 4 } } "
      "blobs { shape { dim: 3 } data: [1, 2, 3] }");
  Blob top(DataType::kFloat64);
  try {
    bad->SetUp({}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter_param.shape"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Parameter)"), std::string::npos);
  }
  auto negative = CreateLayer("type: 'Parameter' parameter_param { shape { dim: -1 } }");
  try {
    negative->SetUp({}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter_param.shape"), std::string::npos) << e.what();
  }
  auto layer = CreateLayer("type: 'Parameter' parameter_param { shape { dim: 1 } }");
  auto bottom = MakeBlob({1}, {});
  EXPECT_THROW(layer->SetUp({bottom.get()}, {&top}), ConfigError);
}

TEST(ParameterCaffe, LayerZoo) { CheckLayerAgainstCaffe("layer_zoo", "param_blob"); }

}  // namespace
}  // namespace crema::testing
