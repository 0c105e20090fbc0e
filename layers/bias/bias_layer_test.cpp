#include "layers/bias/bias_layer.hpp"

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
    Bias,
    LayerCase("bias_param { filler { type: 'gaussian' std: 1 } }", {{2, 3, 4, 5}}).Name("learned"),
    LayerCase("bias_param { axis: 1 num_axes: -1 filler { type: 'uniform' } }", {{2, 3, 4}})
        .Name("learned_to_end"),
    LayerCase("bias_param { axis: -2 num_axes: 2 filler { type: 'uniform' } }", {{2, 3, 4, 2}})
        .Name("learned_negative_axis"),
    LayerCase("bias_param { num_axes: 0 filler { type: 'constant' value: 0.7 } }", {{2, 3}})
        .Name("learned_scalar"),
    LayerCase("bias_param { axis: 0 num_axes: 1 filler { type: 'uniform' } }", {{3, 2, 2}})
        .Name("learned_axis0"),
    LayerCase("", {{2, 3, 4, 5}, {3, 4}}).Name("bottom1"),
    LayerCase("bias_param { axis: 0 }", {{2, 3, 4}, {2}}).Name("bottom1_axis0"),
    LayerCase("bias_param { axis: 2 }", {{2, 3, 4}, {4}}).Name("bottom1_last_axis"),
    LayerCase("", {{2, 3}, {}}).Name("bottom1_scalar"));

namespace crema {
namespace {

using testing::ExpectSetUpError;
using testing::FillUniform;
using testing::RunZooCase;
using testing::ZooCase;

// top[o, d, i] = x[o, d, i] + b[d].
TEST(BiasValues, ForwardAndBackwardByDefinition) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tol = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
    auto layer = testing::CreateLayer(
        "type: 'Bias' bias_param { axis: 1 num_axes: 2 filler { type: 'gaussian' } }", dtype);
    Blob bottom(std::vector<int>{2, 3, 2, 4}, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer->SetUp({&bottom}, {&top});
    const Blob& b = *layer->blobs()[0];
    ASSERT_EQ(b.shape(), (std::vector<int>{3, 2}));
    layer->Forward({&bottom}, {&top});
    for (int64_t k = 0; k < top.count(); ++k)
      EXPECT_NEAR(top.data_at(k), bottom.data_at(k) + b.data_at(k / 4 % 6), tol) << k;
    for (int64_t k = 0; k < top.count(); ++k)
      CREMA_DISPATCH_FLOAT(dtype, T, top.mutable_cpu_diff<T>()[k] = static_cast<T>(0.01 * k));
    layer->blobs()[0]->SetDiffZero();
    for (int pass = 1; pass <= 2; ++pass) {
      layer->Backward({&top}, {true}, {&bottom});
      for (int d = 0; d < 6; ++d) {
        double sum = 0;
        for (int o = 0; o < 2; ++o)
          for (int i = 0; i < 4; ++i) sum += 0.01 * ((o * 6 + d) * 4 + i);
        // Learned diffs accumulate.
        EXPECT_NEAR(b.diff_at(d), pass * sum, tol) << d;
      }
    }
    for (int64_t k = 0; k < top.count(); ++k) EXPECT_NEAR(bottom.diff_at(k), 0.01 * k, tol);
  }
}

TEST(BiasValues, SecondBottomDiffIsWritten) {
  auto layer = testing::CreateLayer("type: 'Bias' bias_param { axis: 0 }");
  auto x = testing::MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = testing::MakeBlob({2}, {10, -10});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get(), b.get()}, {&top});
  EXPECT_TRUE(layer->blobs().empty());
  layer->Forward({x.get(), b.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{11, 12, 13, -6, -5, -4}));
  testing::SetDiffOf(&top, {1, 2, 3, 4, 5, 6});
  testing::SetDiffOf(b.get(), {100, 100});
  layer->Backward({&top}, {false, true}, {x.get(), b.get()});
  EXPECT_EQ(testing::DiffOf(*b), (std::vector<double>{6, 15}));
}

TEST(BiasValues, LoadedBlobIsUsed) {
  auto layer = testing::CreateLayer(
      "type: 'Bias' blobs { shape { dim: 2 } data: 1 data: 2 } bias_param { filler { type: "
      "'constant' value: 9 } }");
  auto x = testing::MakeBlob({1, 2, 1}, {0, 0});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get()}, {&top});
  EXPECT_EQ(layer->blobs()[0]->dtype(), DataType::kFloat64);
  layer->Forward({x.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{1, 2}));
}

TEST(BiasErrors, Parameters) {
  ExpectSetUpError("type: 'Bias' bias_param { axis: 4 }", {{2, 3, 4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { axis: -4 }", {{2, 3, 4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { num_axes: -2 }", {{2, 3, 4}}, "bias_param.num_axes");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 1 num_axes: 3 }", {{2, 3, 4}},
                   "bias_param.num_axes");
  ExpectSetUpError("type: 'Bias' bias_param { filler { type: 'nonsense' } }", {{2, 3}},
                   "bias_param.filler");
  ExpectSetUpError("type: 'Bias' blobs { shape { dim: 4 } }", {{2, 3}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' blobs { shape { dim: 3 } } blobs { shape { dim: 3 } }", {{2, 3}},
                   "blobs");
}

TEST(BiasErrors, Shapes) {
  ExpectSetUpError("type: 'Bias'", {{2, 3, 4}, {4}}, "bias_param.axis");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 2 }", {{2, 3, 4}, {4, 1}}, "extends past");
  ExpectSetUpError("type: 'Bias' bias_param { axis: 5 }", {{2, 3, 4}, {4}}, "bias_param.axis");
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(BiasCaffe, LearnedBias) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"bias_param",
                          {{"fwd/058_scale_bias__top0_scale_bias.f32", {2, 6, 8, 8}}},
                          "fwd/062_bias_param__top0_bias_param.f32",
                          "bwd/065_concat__bottom0_bias_param.f32",
                          {"bwd/062_bias_param__bottom0_scale_bias.f32"},
                          {"grad/062_bias_param__param0.f32"}});
}

TEST(BiasCaffe, BiasFromSecondBottom) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"bias_by_blob",
                          {{"fwd/027_elu__top0_elu.f32", {2, 4, 4, 4}},
                           {"fwd/059_gmax_flat__top0_gmax_flat.f32", {2, 4}}},
                          "fwd/063_bias_by_blob__top0_bias_by_blob.f32",
                          "bwd/113_side_f9__bottom0_bias_by_blob.f32",
                          {"bwd/063_bias_by_blob__bottom0_elu.f32",
                           "bwd/063_bias_by_blob__bottom1_gmax_flat_gmax_flat_0_split_1.f32"},
                          {}});
}

}  // namespace
}  // namespace crema
