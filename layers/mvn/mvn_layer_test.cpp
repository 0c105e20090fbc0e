#include "layers/mvn/mvn_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    MVN, LayerCase("", {{2, 3, 4, 5}}).Name("default"),
    LayerCase("mvn_param { across_channels: true }", {{2, 3, 4, 5}}).Name("across_channels"),
    LayerCase("mvn_param { normalize_variance: false }", {{2, 3, 4, 5}}).Name("mean_only"),
    LayerCase("mvn_param { normalize_variance: false across_channels: true }", {{2, 3, 4}})
        .Name("mean_only_across"),
    LayerCase("", {{3, 7}}).Name("two_axes"),
    LayerCase("mvn_param { across_channels: true }", {{2, 2, 3, 2, 2}}).Name("five_axes"),
    // Caffe's backward treats std + eps as std: with a large eps it is not the exact gradient, so
    // only the other checks apply (the value test and the Caffe comparison cover it).
    LayerCase("mvn_param { eps: 0.01 across_channels: true }", {{2, 3, 4}})
        .NoGradientCheck()
        .Name("eps"));

namespace crema {
namespace {

using testing::FillUniform;
using testing::RunZooCase;
using testing::ZooCase;

struct Mode {
  bool normalize_variance;
  bool across_channels;
  double eps;
};

class MVNValues : public ::testing::TestWithParam<DataType> {};

TEST_P(MVNValues, ForwardAndCaffesBackwardByDefinition) {
  const DataType dtype = GetParam();
  const double tol = dtype == DataType::kFloat64 ? 1e-11 : 2e-5;
  for (const Mode& mode : {Mode{true, false, 1e-9}, Mode{true, true, 0.05},
                           Mode{false, false, 1e-9}, Mode{false, true, 0.5}}) {
    SCOPED_TRACE(StrCat(mode.normalize_variance, " ", mode.across_channels, " ", mode.eps));
    auto layer = testing::CreateLayer(
        StrCat("type: 'MVN' mvn_param { normalize_variance: ", mode.normalize_variance,
               " across_channels: ", mode.across_channels, " eps: ", mode.eps, " }"),
        dtype);
    Blob bottom(std::vector<int>{2, 3, 2, 3}, dtype), top(dtype);
    FillUniform(&bottom, -2, 3);
    layer->SetUp({&bottom}, {&top});
    layer->Forward({&bottom}, {&top});
    for (int64_t k = 0; k < top.count(); ++k)
      CREMA_DISPATCH_FLOAT(dtype, T, top.mutable_cpu_diff<T>()[k] = static_cast<T>(std::sin(k)));
    layer->Backward({&top}, {true}, {&bottom});
    const int dim = mode.across_channels ? 18 : 6;
    const double eps = static_cast<float>(mode.eps);
    for (int g = 0; g < 36 / dim; ++g) {
      double mean = 0, var = 0;
      for (int i = 0; i < dim; ++i) mean += bottom.data_at(g * dim + i) / dim;
      for (int i = 0; i < dim; ++i) var += std::pow(bottom.data_at(g * dim + i) - mean, 2) / dim;
      const double denominator = mode.normalize_variance ? std::sqrt(var) + eps : 1.0;
      std::vector<double> y(dim);
      double mean_dy = 0, mean_dy_y = 0;
      for (int i = 0; i < dim; ++i) {
        const int64_t k = g * dim + i;
        y[i] = (bottom.data_at(k) - mean) / denominator;
        EXPECT_NEAR(top.data_at(k), y[i], tol) << k;
        mean_dy += top.diff_at(k) / dim;
        mean_dy_y += top.diff_at(k) * y[i] / dim;
      }
      for (int i = 0; i < dim; ++i) {
        const int64_t k = g * dim + i;
        const double expected = mode.normalize_variance
                                    ? (top.diff_at(k) - mean_dy - y[i] * mean_dy_y) / denominator
                                    : top.diff_at(k) - mean_dy;
        EXPECT_NEAR(bottom.diff_at(k), expected, tol) << k;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MVNValues,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64));

TEST(MVNErrors, Shapes) {
  auto layer = testing::CreateLayer("name: 'bad' type: 'MVN'");
  Blob scalar(std::vector<int>{}, DataType::kFloat64), top(DataType::kFloat64);
  try {
    layer->SetUp({&scalar}, {&top});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (MVN)"), std::string::npos) << e.what();
  }
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(MVNCaffe, PerChannel) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"mvn",
                          {{"fwd/051_lrn_within__top0_lrn_within.f32", {2, 6, 8, 8}}},
                          "fwd/055_mvn__top0_mvn.f32",
                          "bwd/079_flatten_ax__bottom0_mvn.f32",
                          {"bwd/055_mvn__bottom0_lrn_within_lrn_within_0_split_0.f32"},
                          {}});
}

TEST(MVNCaffe, AcrossChannelsMeanOnly) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"mvn_across",
                          {{"fwd/045_pool_ave__top0_pool_ave.f32", {2, 6, 5, 5}}},
                          "fwd/056_mvn_across__top0_mvn_across.f32",
                          "bwd/106_side_f2__bottom0_mvn_across.f32",
                          {"bwd/056_mvn_across__bottom0_pool_ave.f32"},
                          {}});
}

TEST(MVNCaffe, AcrossChannelsWithEps) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"mvn_both",
                          {{"fwd/033_bnll__top0_bnll.f32", {2, 4, 4, 4}}},
                          "fwd/057_mvn_both__top0_mvn_both.f32",
                          "bwd/105_side_f1__bottom0_mvn_both.f32",
                          {"bwd/057_mvn_both__bottom0_bnll.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
