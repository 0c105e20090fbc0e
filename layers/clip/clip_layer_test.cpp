#include "layers/clip/clip_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    Clip,
    LayerCase("clip_param { min: -0.3 max: 0.4 }", {{2, 3, 4, 5}})
        .Range(-1, 0.1)
        .Kink(-0.3)
        .Eltwise()
        .Name("low"),
    LayerCase("clip_param { min: -0.3 max: 0.4 }", {{2, 3, 4, 5}})
        .Range(0, 1)
        .Kink(0.4)
        .Eltwise()
        .Name("high"),
    LayerCase("clip_param { min: -2 max: 2 }", {{3, 5}}).Eltwise().Name("wide"),
    LayerCase("clip_param { min: 0.5 max: 0.5 }", {{3, 5}}).Eltwise().Kink(0.5).Name("point"));

namespace crema::testing {
namespace {

TEST(ClipLayer, MatchesHandComputed) {
  // Both ends pass the gradient, as Caffe.
  ExpectValues("type: 'Clip' clip_param { min: -0.5 max: 1 }", {-2, -0.5, 0, 1, 3},
               {-0.5, -0.5, 0, 1, 1}, {0, 1, 1, 1, 0});
}

TEST(ClipLayer, InPlaceUsesTheInputForGradients) {
  auto layer = CreateLayer("type: 'Clip' clip_param { min: -1 max: 1 }");
  auto blob = MakeBlob({4}, {-3, -1, 0.5, 2});
  layer->SetUp({blob.get()}, {blob.get()});
  layer->Forward({blob.get()}, {blob.get()});
  EXPECT_EQ(DataOf(*blob), (std::vector<double>{-1, -1, 0.5, 1}));
  SetDiffOf(blob.get(), {1, 2, 3, 4});
  layer->Backward({blob.get()}, {true}, {blob.get()});
  EXPECT_EQ(DiffOf(*blob), (std::vector<double>{0, 2, 3, 0}));
}

TEST(ClipLayer, Errors) {
  ExpectParamError("type: 'Clip'", {2}, "clip_param.min");
  ExpectParamError("type: 'Clip' clip_param { min: 2 max: 1 }", {2}, "clip_param.max");
  // clip_param is required in the schema, so the text parser refuses a half-filled one; a
  // parameter built in code reaches the layer.
  LayerParameter param = ParseLayerParam("name: 'bad' type: 'Clip'");
  param.mutable_clip_param()->set_min(0);
  auto layer = LayerRegistry::Create(param);
  Blob bottom(std::vector<int>{2}), top;
  try {
    layer->SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("clip_param.max"), std::string::npos) << e.what();
  }
}

TEST(ClipLayer, MatchesCaffe) {
  ExpectMatchesCaffe({"layer_zoo",
                      "clip",
                      {2, 6, 8, 8},
                      "fwd/011_conv_a__top0_conv_a.f32",
                      "fwd/041_clip__top0_clip.f32",
                      "bwd/042_clip_clip_0_split__bottom0_clip.f32",
                      "bwd/041_clip__bottom0_conv_a_conv_a_0_split_5.f32",
                      {}});
}

}  // namespace
}  // namespace crema::testing
