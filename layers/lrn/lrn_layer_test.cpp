#include "layers/lrn/lrn_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    LRN, LayerCase("", {{2, 7, 3, 3}}).Name("across_default"),
    LayerCase("lrn_param { local_size: 3 alpha: 0.5 beta: 0.6 k: 2 }", {{2, 4, 3, 2}})
        .Name("across_params"),
    LayerCase("lrn_param { local_size: 7 alpha: 2 }", {{1, 3, 2, 2}}).Name("across_wider"),
    LayerCase("lrn_param { local_size: 1 beta: 1.5 }", {{2, 2, 2, 3}}).Name("across_size1"),
    LayerCase("lrn_param { norm_region: WITHIN_CHANNEL }", {{2, 2, 5, 6}}).Name("within_default"),
    LayerCase("lrn_param { norm_region: WITHIN_CHANNEL local_size: 3 alpha: 3 beta: 0.5 k: 7 }",
              {{2, 3, 4, 3}})
        .Name("within_params"),
    LayerCase("lrn_param { norm_region: WITHIN_CHANNEL local_size: 1 }", {{1, 2, 3, 3}})
        .Name("within_size1"));

namespace crema {
namespace {

using testing::ExpectSetUpError;
using testing::FillUniform;
using testing::RunZooCase;
using testing::ZooCase;

// By definition, in double.
std::vector<double> NaiveLRN(const Blob& x, bool across, int size, double alpha, double beta,
                             double k) {
  const int num = x.shape(0), channels = x.shape(1), height = x.shape(2), width = x.shape(3);
  const int half = (size - 1) / 2;
  std::vector<double> y(x.count());
  auto at = [&](int n, int c, int h, int w) {
    if (c < 0 || c >= channels || h < 0 || h >= height || w < 0 || w >= width) return 0.0;
    return x.data_at(((static_cast<int64_t>(n) * channels + c) * height + h) * width + w);
  };
  for (int n = 0; n < num; ++n)
    for (int c = 0; c < channels; ++c)
      for (int h = 0; h < height; ++h)
        for (int w = 0; w < width; ++w) {
          double sum = 0, scale;
          if (across) {
            for (int d = -half; d <= half; ++d) sum += std::pow(at(n, c + d, h, w), 2);
            scale = k + alpha / size * sum;
          } else {
            for (int dh = -half; dh <= half; ++dh)
              for (int dw = -half; dw <= half; ++dw) sum += std::pow(at(n, c, h + dh, w + dw), 2);
            scale = 1 + alpha / (size * size) * sum;
          }
          y[((static_cast<int64_t>(n) * channels + c) * height + h) * width + w] =
              at(n, c, h, w) * std::pow(scale, -beta);
        }
  return y;
}

TEST(LRNValues, ForwardByDefinition) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    for (bool across : {true, false}) {
      SCOPED_TRACE(StrCat(DataTypeName(dtype), across ? " across" : " within"));
      const double tol = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
      auto layer = testing::CreateLayer(
          StrCat("type: 'LRN' lrn_param { local_size: 3 alpha: 0.75 beta: 0.5 k: 1.5 "
                 "norm_region: ",
                 across ? "ACROSS_CHANNELS" : "WITHIN_CHANNEL", " }"),
          dtype);
      Blob bottom(std::vector<int>{2, 5, 4, 3}, dtype), top(dtype);
      FillUniform(&bottom, -2, 2);
      layer->SetUp({&bottom}, {&top});
      layer->Forward({&bottom}, {&top});
      const std::vector<double> expected = NaiveLRN(bottom, across, 3, 0.75, 0.5, 1.5);
      for (int64_t i = 0; i < top.count(); ++i) EXPECT_NEAR(top.data_at(i), expected[i], tol) << i;
    }
  }
}

// ACROSS_CHANNELS runs over chunks of 64 positions of all channels, in parallel: a plane that
// is not a multiple of the chunk, several images, Caffe's default beta 0.75 (computed with square
// roots) and another beta; a forward-only layer (no s kept) gives the same output.
TEST(LRNValues, AcrossChannelsInChunksByDefinition) {
  for (const char* params : {"local_size: 5 alpha: 0.0001 beta: 0.75",
                             "local_size: 3 alpha: 2 "
                             "beta: 0.6 k: 1.5"}) {
    for (bool forward_only : {false, true}) {
      SCOPED_TRACE(StrCat(params, forward_only ? ", forward only" : ""));
      auto layer = testing::CreateLayer(StrCat("type: 'LRN' lrn_param { ", params, " }"),
                                        DataType::kFloat32);
      layer->set_forward_only(forward_only);
      Blob bottom(std::vector<int>{3, 12, 13, 11}, DataType::kFloat32), top(DataType::kFloat32);
      FillUniform(&bottom, -30, 30);
      layer->SetUp({&bottom}, {&top});
      layer->Forward({&bottom}, {&top});
      const LRNParameter& p = layer->layer_param().lrn_param();
      const std::vector<double> expected =
          NaiveLRN(bottom, true, static_cast<int>(p.local_size()), p.alpha(), p.beta(), p.k());
      double worst = 0;
      for (int64_t i = 0; i < top.count(); ++i)
        worst = std::max(
            worst, std::abs(top.data_at(i) - expected[i]) / std::max(1e-3, std::abs(expected[i])));
      EXPECT_LT(worst, 2e-6);
    }
  }
}

TEST(LRNValues, HandComputedAcrossChannels) {
  // Two channels, local_size 3, alpha 3, beta 1, k 1: s = 1 + (x0^2 + x1^2) for both.
  auto layer =
      testing::CreateLayer("type: 'LRN' lrn_param { local_size: 3 alpha: 3 beta: 1 k: 1 }");
  auto bottom = testing::MakeBlob({1, 2, 1, 1}, {1, 2});
  Blob top(DataType::kFloat64);
  layer->SetUp({bottom.get()}, {&top});
  layer->Forward({bottom.get()}, {&top});
  EXPECT_NEAR(top.data_at(0), 1.0 / 6, 1e-15);
  EXPECT_NEAR(top.data_at(1), 2.0 / 6, 1e-15);
}

TEST(LRNErrors, Parameters) {
  ExpectSetUpError("type: 'LRN' lrn_param { local_size: 4 }", {{1, 3, 2, 2}},
                   "lrn_param.local_size");
  ExpectSetUpError("type: 'LRN' lrn_param { local_size: 0 }", {{1, 3, 2, 2}},
                   "lrn_param.local_size");
  ExpectSetUpError("type: 'LRN'", {{3, 2, 2}}, "4 axes");
}

TEST(LRNErrors, NotInPlace) {
  auto layer = testing::CreateLayer("type: 'LRN'");
  Blob blob(std::vector<int>{1, 3, 2, 2}, DataType::kFloat64);
  EXPECT_THROW(layer->SetUp({&blob}, {&blob}), ConfigError);
  EXPECT_FALSE(layer->AllowsInPlace());
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(LRNCaffe, AcrossChannels) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"lrn_across",
                          {{"fwd/021_relu_leaky__top0_relu_a.f32", {2, 6, 8, 8}}},
                          "fwd/050_lrn_across__top0_lrn_across.f32",
                          "bwd/069_eltwise_sum__bottom1_lrn_across.f32",
                          {"bwd/050_lrn_across__bottom0_relu_a_relu_leaky_0_split_1.f32"},
                          {}});
}

TEST(LRNCaffe, WithinChannel) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"lrn_within",
                          {{"fwd/011_conv_a__top0_conv_a.f32", {2, 6, 8, 8}}},
                          "fwd/051_lrn_within__top0_lrn_within.f32",
                          "bwd/052_lrn_within_lrn_within_0_split__bottom0_lrn_within.f32",
                          {"bwd/051_lrn_within__bottom0_conv_a_conv_a_0_split_8.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
