#include "layers/scale/scale_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "math/blas_setup.hpp"
#include "math/cpu_isa.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    Scale,
    LayerCase("scale_param { filler { type: 'uniform' min: 0.5 max: 1.5 } }", {{2, 3, 4, 5}})
        .Name("learned"),
    LayerCase("", {{2, 3, 4}}).Name("default_filler"),
    LayerCase("scale_param { bias_term: true filler { type: 'uniform' } "
              "bias_filler { type: 'gaussian' } }",
              {{2, 3, 4, 5}})
        .Name("learned_bias"),
    LayerCase("scale_param { axis: 2 num_axes: 2 filler { type: 'uniform' } }", {{2, 3, 4, 5}})
        .Name("axis2_num_axes2"),
    LayerCase("scale_param { axis: -2 num_axes: -1 filler { type: 'uniform' } bias_term: true "
              "bias_filler { type: 'uniform' } }",
              {{2, 3, 4}})
        .Name("to_end_negative_axis"),
    LayerCase("scale_param { num_axes: 0 filler { type: 'constant' value: -1.5 } }", {{2, 3}})
        .Name("learned_scalar"),
    LayerCase("scale_param { axis: 0 filler { type: 'uniform' } }", {{3, 2, 2}}).Name("axis0"),
    LayerCase("", {{2, 3, 4, 5}, {3, 4}}).Name("bottom1"),
    LayerCase("scale_param { axis: 0 }", {{2, 3, 4}, {2, 3}}).Name("bottom1_axis0"),
    LayerCase("", {{2, 3}, {}}).Name("bottom1_scalar"),
    LayerCase("scale_param { bias_term: true bias_filler { type: 'gaussian' } }", {{2, 3, 4}, {3}})
        .Name("bottom1_bias"),
    // Caffe shapes the bias from axis and num_axes even when the scale comes from bottom[1].
    LayerCase("scale_param { bias_term: true num_axes: 2 bias_filler { type: 'gaussian' } }",
              {{2, 3, 4}, {3}})
        .Name("bottom1_bias_num_axes2"));

namespace crema {
namespace {

using testing::ExpectSetUpError;
using testing::FillUniform;
using testing::RunZooCase;
using testing::ZooCase;

// top[o, d, i] = x[o, d, i] * s[d] + b[d].
TEST(ScaleValues, ForwardAndBackwardByDefinition) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double tol = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
    auto layer = testing::CreateLayer(
        "type: 'Scale' scale_param { axis: 1 num_axes: 2 bias_term: true filler { type: "
        "'gaussian' } bias_filler { type: 'gaussian' } }",
        dtype);
    Blob bottom(std::vector<int>{2, 3, 2, 4}, dtype), top(dtype);
    FillUniform(&bottom, -1, 1);
    layer->SetUp({&bottom}, {&top});
    ASSERT_EQ(layer->blobs().size(), 2u);
    const Blob& s = *layer->blobs()[0];
    const Blob& b = *layer->blobs()[1];
    ASSERT_EQ(s.shape(), (std::vector<int>{3, 2}));
    ASSERT_EQ(b.shape(), (std::vector<int>{3, 2}));
    layer->Forward({&bottom}, {&top});
    for (int64_t k = 0; k < top.count(); ++k)
      EXPECT_NEAR(top.data_at(k), bottom.data_at(k) * s.data_at(k / 4 % 6) + b.data_at(k / 4 % 6),
                  tol)
          << k;
    for (int64_t k = 0; k < top.count(); ++k)
      CREMA_DISPATCH_FLOAT(dtype, T, top.mutable_cpu_diff<T>()[k] = static_cast<T>(0.01 * k));
    for (auto& blob : layer->blobs()) blob->SetDiffZero();
    for (int pass = 1; pass <= 2; ++pass) {
      layer->Backward({&top}, {true}, {&bottom});
      for (int d = 0; d < 6; ++d) {
        double sum = 0, sum_x = 0;
        for (int o = 0; o < 2; ++o)
          for (int i = 0; i < 4; ++i) {
            const int k = (o * 6 + d) * 4 + i;
            sum += 0.01 * k;
            sum_x += 0.01 * k * bottom.data_at(k);
          }
        // Learned diffs accumulate.
        EXPECT_NEAR(s.diff_at(d), pass * sum_x, tol) << d;
        EXPECT_NEAR(b.diff_at(d), pass * sum, tol) << d;
      }
    }
    for (int64_t k = 0; k < top.count(); ++k)
      EXPECT_NEAR(bottom.diff_at(k), 0.01 * k * s.data_at(k / 4 % 6), tol);
  }
}

TEST(ScaleValues, SecondBottomDiffIsWritten) {
  auto layer = testing::CreateLayer("type: 'Scale' scale_param { axis: 0 }");
  auto x = testing::MakeBlob({2, 3}, {1, 2, 3, 4, 5, 6});
  auto s = testing::MakeBlob({2}, {10, -1});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get(), s.get()}, {&top});
  EXPECT_TRUE(layer->blobs().empty());
  layer->Forward({x.get(), s.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{10, 20, 30, -4, -5, -6}));
  testing::SetDiffOf(&top, {1, 2, 3, 4, 5, 6});
  testing::SetDiffOf(s.get(), {100, 100});
  layer->Backward({&top}, {true, true}, {x.get(), s.get()});
  EXPECT_EQ(testing::DiffOf(*s), (std::vector<double>{14, 77}));
  EXPECT_EQ(testing::DiffOf(*x), (std::vector<double>{10, 20, 30, -4, -5, -6}));
}

TEST(ScaleValues, InPlaceUsesTheOriginalBottomForTheScaleGradient) {
  auto layer = testing::CreateLayer("type: 'Scale' scale_param { num_axes: 0 }");
  auto x = testing::MakeBlob({1, 3}, {1, 2, 3});
  layer->SetUp({x.get()}, {x.get()});
  CREMA_DISPATCH_FLOAT(DataType::kFloat64, T, layer->blobs()[0]->mutable_cpu_data<T>()[0] = 2);
  layer->Forward({x.get()}, {x.get()});
  EXPECT_EQ(testing::DataOf(*x), (std::vector<double>{2, 4, 6}));
  testing::SetDiffOf(x.get(), {1, 1, 1});
  layer->blobs()[0]->SetDiffZero();
  layer->Backward({x.get()}, {true}, {x.get()});
  EXPECT_EQ(layer->blobs()[0]->diff_at(0), 6.0);
  EXPECT_EQ(testing::DiffOf(*x), (std::vector<double>{2, 2, 2}));
}

TEST(ScaleValues, LoadedBlobsAreUsed) {
  auto layer = testing::CreateLayer(
      "type: 'Scale' blobs { shape { dim: 2 } data: 3 data: 4 } blobs { shape { dim: 2 } data: 1 "
      "data: 2 } scale_param { bias_term: true }");
  auto x = testing::MakeBlob({1, 2, 1}, {1, 1});
  Blob top(DataType::kFloat64);
  layer->SetUp({x.get()}, {&top});
  layer->Forward({x.get()}, {&top});
  EXPECT_EQ(testing::DataOf(top), (std::vector<double>{4, 6}));
}

TEST(ScaleErrors, Parameters) {
  ExpectSetUpError("type: 'Scale' scale_param { axis: 3 }", {{2, 3, 4}}, "scale_param.axis");
  ExpectSetUpError("type: 'Scale' scale_param { num_axes: -2 }", {{2, 3, 4}},
                   "scale_param.num_axes");
  ExpectSetUpError("type: 'Scale' scale_param { axis: 2 num_axes: 2 }", {{2, 3, 4}},
                   "scale_param.num_axes");
  ExpectSetUpError("type: 'Scale' scale_param { filler { type: 'nonsense' } }", {{2, 3}},
                   "scale_param.filler");
  ExpectSetUpError("type: 'Scale' scale_param { bias_term: true bias_filler { type: 'nope' } }",
                   {{2, 3}}, "scale_param.bias_filler");
  ExpectSetUpError("type: 'Scale' scale_param { bias_term: true num_axes: 3 }", {{2, 3, 4}, {3}},
                   "scale_param.num_axes");
  ExpectSetUpError("type: 'Scale' scale_param { bias_term: true } blobs { shape { dim: 3 } }",
                   {{2, 3}}, "blobs");
  ExpectSetUpError("type: 'Scale' blobs { shape { dim: 4 } }", {{2, 3}}, "scale_param.axis");
}

TEST(ScaleErrors, Shapes) {
  ExpectSetUpError("type: 'Scale'", {{2, 3, 4}, {4}}, "scale_param.axis");
  ExpectSetUpError("type: 'Scale' scale_param { axis: 2 }", {{2, 3, 4}, {4, 1}}, "extends past");
  ExpectSetUpError("type: 'Scale' scale_param { axis: -5 }", {{2, 3, 4}, {4}}, "scale_param.axis");
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(ScaleCaffe, LearnedWithBias) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"scale_bias",
                          {{"fwd/053_bn_global__top0_bn_global.f32", {2, 6, 8, 8}}},
                          "fwd/058_scale_bias__top0_scale_bias.f32",
                          "bwd/062_bias_param__bottom0_scale_bias.f32",
                          {"bwd/058_scale_bias__bottom0_bn_global.f32"},
                          {"grad/058_scale_bias__param0.f32", "grad/058_scale_bias__param1.f32"}});
}

TEST(ScaleCaffe, ScaleFromSecondBottom) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"scale_by_blob",
                          {{"fwd/054_bn_batch__top0_bn_batch.f32", {2, 4, 4, 4}},
                           {"fwd/059_gmax_flat__top0_gmax_flat.f32", {2, 4}}},
                          "fwd/061_scale_by_blob__top0_scale_by_blob.f32",
                          "bwd/084_spp_ave__bottom0_scale_by_blob.f32",
                          {"bwd/061_scale_by_blob__bottom0_bn_batch.f32",
                           "bwd/061_scale_by_blob__bottom1_gmax_flat_gmax_flat_0_split_0.f32"},
                          {}});
}

TEST(ScaleCaffe, Axis2NumAxes2) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  RunZooCase(dir, ZooCase{"scale_axis2",
                          {{"fwd/039_swish__top0_swish.f32", {2, 6, 8, 8}}},
                          "fwd/064_scale_axis2__top0_scale_axis2.f32",
                          "bwd/107_side_f3__bottom0_scale_axis2.f32",
                          {"bwd/064_scale_axis2__bottom0_swish_swish_0_split_0.f32"},
                          {"grad/064_scale_axis2__param0.f32"}});
}

}  // namespace
}  // namespace crema

namespace crema {
namespace {

// In place (as after BatchNorm), the float results bit for bit against the plain serial loops
// (one float chain per channel in the order outer, inner), with 1 and 2 threads, on a blob big
// enough for the parallel path and with a channel count (7) that is not a multiple of four.
// On the baseline instruction set (no fused multiply-adds: the serial loops below round each
// product as the layer does) the threaded loops give exactly the serial loops' values; on this
// CPU's widest level, one and two threads give the same bits.
TEST(ScaleValues, ThreadedLoopsMatchSerialLoopsExactly) {
  const int outer = 3, channels = 7, inner = 59 * 61;
  const int64_t count = int64_t{outer} * channels * inner;
  const int saved_threads = CpuThreads();
  const ScopedCpuIsaLimit baseline(CpuIsa::kBaseline);
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    auto layer = testing::CreateLayer(
        "type: 'Scale' scale_param { bias_term: true filler { type: 'uniform' min: -2 max: 2 } "
        "bias_filler { type: 'uniform' min: -1 max: 1 } }",
        DataType::kFloat32);
    Blob blob(std::vector<int>{outer, channels, 59, 61}, DataType::kFloat32);
    FillUniform(&blob, -2, 3, 11);
    const std::vector<float> x(blob.cpu_data<float>(), blob.cpu_data<float>() + count);
    layer->SetUp({&blob}, {&blob});
    layer->Forward({&blob}, {&blob});
    const float* s = layer->blobs()[0]->cpu_data<float>();
    const float* b = layer->blobs()[1]->cpu_data<float>();
    int mismatches = 0;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t d = k / inner % channels;
      float expected = x[k] * s[d];
      expected += b[d];
      mismatches += blob.cpu_data<float>()[k] != expected;
    }
    EXPECT_EQ(mismatches, 0) << threads << " threads";

    std::vector<float> dy(count);
    for (int64_t k = 0; k < count; ++k) dy[k] = static_cast<float>(std::cos(0.29 * k));
    std::copy(dy.begin(), dy.end(), blob.mutable_cpu_diff<float>());
    for (auto& param : layer->blobs()) param->SetDiffZero();
    layer->Backward({&blob}, {true}, {&blob});
    // The order math/channel_loops.hpp documents: eight partial sums (positions i % 8), each in
    // the order o, i, then added pairwise.
    for (int d = 0; d < channels; ++d) {
      float part[8] = {}, part_x[8] = {};
      for (int o = 0; o < outer; ++o)
        for (int i = 0; i < inner; ++i) {
          const int64_t k = (int64_t{o} * channels + d) * inner + i;
          part[i % 8] += dy[k];
          part_x[i % 8] += dy[k] * x[k];
        }
      const auto total = [](const float* p) {
        return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      };
      EXPECT_EQ(layer->blobs()[1]->cpu_diff<float>()[d], 0.0f + total(part)) << d;
      EXPECT_EQ(layer->blobs()[0]->cpu_diff<float>()[d], 0.0f + total(part_x)) << d;
    }
    mismatches = 0;
    for (int64_t k = 0; k < count; ++k)
      mismatches += blob.cpu_diff<float>()[k] != dy[k] * s[k / inner % channels];
    EXPECT_EQ(mismatches, 0) << threads << " threads";
  }
  SetCpuIsaLimit(CpuIsa::kAvx512);
  std::vector<std::vector<float>> diffs;
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    SetRandomSeed(1701);
    auto layer = testing::CreateLayer(
        "type: 'Scale' scale_param { bias_term: true filler { type: 'uniform' min: -2 max: 2 } }",
        DataType::kFloat32);
    Blob blob(std::vector<int>{outer, channels, 59, 61}, DataType::kFloat32);
    FillUniform(&blob, -2, 3, 11);
    layer->SetUp({&blob}, {&blob});
    layer->Forward({&blob}, {&blob});
    FillUniform(&blob, -1, 1, 12);
    std::copy(blob.cpu_data<float>(), blob.cpu_data<float>() + count,
              blob.mutable_cpu_diff<float>());
    for (auto& param : layer->blobs()) param->SetDiffZero();
    layer->Backward({&blob}, {true}, {&blob});
    const Blob& scale = *layer->blobs()[0];
    diffs.emplace_back(scale.cpu_diff<float>(), scale.cpu_diff<float>() + scale.count());
  }
  EXPECT_EQ(diffs[0], diffs[1]) << CpuIsaName(CpuIsaLevel());
  SetCpuThreads(saved_threads);
}

}  // namespace
}  // namespace crema
