#include "layers/embed/embed_layer.hpp"

#include <gtest/gtest.h>

#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"

#define CREMA_EMBED_FILLERS \
  " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } "

CREMA_LAYER_CONFORMANCE(
    Embed,
    LayerCase("embed_param { num_output: 3 input_dim: 5" CREMA_EMBED_FILLERS "}", {{4}})
        .Integer(0, 5)
        .Name("bias"),
    LayerCase("embed_param { num_output: 2 input_dim: 4 bias_term: false" CREMA_EMBED_FILLERS "}",
              {{2, 3}})
        .Integer(0, 4)
        .Name("no_bias_2d"),
    LayerCase("embed_param { num_output: 4 input_dim: 3" CREMA_EMBED_FILLERS "}", {{3, 5}})
        .Integer(0, 3)
        .Name("repeated_rows"));

namespace crema::testing {
namespace {

TEST(EmbedValues, ByHand) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    auto layer = CreateLayer(
        "type: 'Embed' embed_param { num_output: 2 input_dim: 3 } "
        "blobs { shape { dim: 3 dim: 2 } data: [1, 2, 3, 4, 5, 6] } "
        "blobs { shape { dim: 2 } data: [0.5, -0.5] }",
        dtype);
    EXPECT_FALSE(layer->AllowForceBackward(0));
    auto ids = MakeBlob({2, 2}, {2, 0, 2, 1}, dtype);
    Blob top(dtype);
    layer->SetUp({ids.get()}, {&top});
    EXPECT_EQ(top.shape(), (std::vector<int>{2, 2, 2}));
    layer->Forward({ids.get()}, {&top});
    EXPECT_EQ(DataOf(top), (std::vector<double>{5.5, 5.5, 1.5, 1.5, 5.5, 5.5, 3.5, 3.5}));
    SetDiffOf(&top, {1, 2, 3, 4, 5, 6, 7, 8});
    for (auto& blob : layer->blobs()) blob->SetDiffZero();
    layer->Backward({&top}, {false}, {ids.get()});
    // Row 2 is used twice: its gradients add up; row 1 once, row 0 once.
    EXPECT_EQ(DiffOf(*layer->blobs()[0]), (std::vector<double>{3, 4, 7, 8, 6, 8}));
    EXPECT_EQ(DiffOf(*layer->blobs()[1]), (std::vector<double>{16, 20}));
    layer->Backward({&top}, {false}, {ids.get()});  // accumulates
    EXPECT_EQ(DiffOf(*layer->blobs()[1]), (std::vector<double>{32, 40}));
  }
}

TEST(EmbedValues, FillersAndShapes) {
  auto layer = CreateLayer(
      "type: 'Embed' embed_param { num_output: 4 input_dim: 7 "
      "weight_filler { type: 'constant' value: 2 } bias_filler { type: 'constant' value: 1 } }");
  auto ids = MakeBlob({3}, {0, 6, 3});
  Blob top(DataType::kFloat64);
  layer->SetUp({ids.get()}, {&top});
  EXPECT_EQ(layer->blobs()[0]->shape(), (std::vector<int>{7, 4}));
  EXPECT_EQ(layer->blobs()[1]->shape(), (std::vector<int>{4}));
  layer->Forward({ids.get()}, {&top});
  EXPECT_EQ(DataOf(top), std::vector<double>(12, 3.0));
}

TEST(EmbedErrors, BadIndicesAreRuntimeErrors) {
  auto layer = CreateLayer("name: 'emb' type: 'Embed' embed_param { num_output: 2 input_dim: 3 }");
  Blob top(DataType::kFloat64);
  for (double bad : {3.0, -1.0, 1.5}) {
    auto ids = MakeBlob({2}, {0, bad});
    layer->SetUp({ids.get()}, {&top});
    try {
      layer->Forward({ids.get()}, {&top});
      ADD_FAILURE() << "expected a RuntimeError for index " << bad;
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("layer \"emb\" (Embed)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not an integer index in [0, 3)"), std::string::npos)
          << e.what();
    }
  }
  auto ids = MakeBlob({2}, {0, 1});
  layer->Forward({ids.get()}, {&top});
  EXPECT_THROW(layer->Backward({&top}, {true}, {ids.get()}), ConfigError);
}

void ExpectError(const std::string& param, const std::string& needle) {
  SCOPED_TRACE(param);
  auto layer = CreateLayer("name: 'bad' type: 'Embed' " + param);
  auto ids = MakeBlob({2}, {0, 1});
  Blob top(DataType::kFloat64);
  try {
    layer->SetUp({ids.get()}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Embed)"), std::string::npos) << e.what();
  }
}

TEST(EmbedErrors, Parameters) {
  ExpectError("embed_param { input_dim: 3 }", "embed_param.num_output");
  ExpectError("embed_param { num_output: 2 }", "embed_param.input_dim");
  ExpectError("embed_param { num_output: 2 input_dim: 3 weight_filler { type: 'bogus' } }",
              "embed_param.weight_filler");
  ExpectError("embed_param { num_output: 2 input_dim: 3 bias_filler { type: 'bogus' } }",
              "embed_param.bias_filler");
  ExpectError("embed_param { num_output: 2 input_dim: 3 } blobs { shape { dim: 3 dim: 2 } }",
              "blobs");
  ExpectError(
      "embed_param { num_output: 2 input_dim: 3 bias_term: false } "
      "blobs { shape { dim: 2 dim: 2 } data: [1, 2, 3, 4] }",
      "weight shape mismatch");
}

TEST(EmbedCaffe, LayerZooAux) { CheckLayerAgainstCaffe("layer_zoo_aux", "embed"); }

}  // namespace
}  // namespace crema::testing
