#include "layers/batch_norm/batch_norm_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "math/blas_setup.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/layer_zoo.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

// Stored statistics for 3 channels: mean (0.1, -0.05, 0.2), variance (0.75, 0.3, 1.1), each
// stored times the factor 2.
constexpr const char* kStats3 =
    " blobs { shape { dim: 3 } data: 0.2 data: -0.1 data: 0.4 }"
    " blobs { shape { dim: 3 } data: 1.5 data: 0.6 data: 2.2 }"
    " blobs { shape { dim: 1 } data: 2 }";

std::string WithStats(const std::string& text) { return text + kStats3; }

}  // namespace
}  // namespace crema

// Batch-statistics cases use moving_average_fraction 0: Forward rewrites the statistics blobs,
// and with fraction 0 a second Forward writes the same values again, which the proto round trip
// needs. The fraction itself is tested below.
CREMA_LAYER_CONFORMANCE(
    BatchNorm,
    LayerCase("batch_norm_param { moving_average_fraction: 0 }", {{2, 3, 4, 5}}).Name("train"),
    LayerCase("batch_norm_param { moving_average_fraction: 0 eps: 0.1 }", {{3, 4}})
        .Name("train_2d_eps"),
    LayerCase("batch_norm_param { moving_average_fraction: 0 }", {{7}}).Name("train_1d"),
    LayerCase("batch_norm_param { moving_average_fraction: 0 use_global_stats: false }",
              {{2, 2, 3, 3}})
        .Phase(TEST)
        .Name("test_batch_stats"),
    LayerCase("batch_norm_param { moving_average_fraction: 0 }", {{2, 3, 2, 2, 2}})
        .Name("train_3d"),
    // Global statistics: the output depends on the statistics blobs, which get no gradient (as in
    // Caffe), so the harness' parameter gradient check does not apply; the bottom gradient is
    // checked in BatchNormGradient below.
    LayerCase(crema::WithStats(""), {{2, 3, 4, 5}}).Phase(TEST).NoGradientCheck().Name("test"),
    LayerCase(crema::WithStats("batch_norm_param { use_global_stats: true eps: 0.01 }"),
              {{2, 3, 4}})
        .NoGradientCheck()
        .Name("train_global_stats"));

namespace crema {
namespace {

using testing::CheckGradient;
using testing::ExpectNearRef;
using testing::ExpectSetUpError;
using testing::FillUniform;
using testing::RunZooCase;
using testing::ZooCase;

TEST(BatchNormGradient, GlobalStatsBottom) {
  for (const char* text : {"", "batch_norm_param { use_global_stats: true eps: 0.01 }"}) {
    LayerParameter param = testing::ParseLayerParam(WithStats(text));
    param.set_type("BatchNorm");
    param.set_phase(TEST);
    BatchNormLayer layer(param);
    layer.set_dtype(DataType::kFloat64);
    Blob bottom(std::vector<int>{2, 3, 4, 5}, DataType::kFloat64), top(DataType::kFloat64);
    FillUniform(&bottom, -1, 1);
    layer.SetUp({&bottom}, {&top});
    ASSERT_TRUE(layer.use_global_stats());
    CheckGradient(&layer, {&bottom}, {&top}, {}, 0, false);
  }
}

// Per channel over (n, spatial): mean and biased variance.
void ChannelStats(const Blob& x, int c, double* mean, double* var) {
  const int num = x.shape(0), channels = x.shape(1);
  const int64_t spatial = x.count(2);
  double sum = 0, sumsq = 0;
  for (int n = 0; n < num; ++n)
    for (int64_t i = 0; i < spatial; ++i) sum += x.data_at((n * channels + c) * spatial + i);
  *mean = sum / (num * spatial);
  for (int n = 0; n < num; ++n)
    for (int64_t i = 0; i < spatial; ++i) {
      const double d = x.data_at((n * channels + c) * spatial + i) - *mean;
      sumsq += d * d;
    }
  *var = sumsq / (num * spatial);
}

class BatchNormValues : public ::testing::TestWithParam<DataType> {};

TEST_P(BatchNormValues, BatchStatisticsAndMovingAverages) {
  const DataType dtype = GetParam();
  const double tol = dtype == DataType::kFloat64 ? 1e-12 : 2e-6;
  auto layer = testing::CreateLayer(
      "type: 'BatchNorm' batch_norm_param { moving_average_fraction: 0.9 eps: 0.001 }", dtype);
  Blob bottom(std::vector<int>{3, 2, 2, 3}, dtype), top(dtype);
  FillUniform(&bottom, -2, 3);
  layer->SetUp({&bottom}, {&top});
  ASSERT_EQ(layer->blobs().size(), 3u);
  EXPECT_EQ(layer->blobs()[2]->shape(), (std::vector<int>{1}));
  EXPECT_FALSE(layer->param_propagate_down(0));
  ASSERT_EQ(layer->layer_param().param_size(), 3);
  EXPECT_EQ(layer->layer_param().param(1).lr_mult(), 0.f);
  layer->Forward({&bottom}, {&top});
  const int m = 3 * 6;
  for (int c = 0; c < 2; ++c) {
    double mean, var;
    ChannelStats(bottom, c, &mean, &var);
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) {
        const int64_t k = (n * 2 + c) * 6 + i;
        EXPECT_NEAR(top.data_at(k), (bottom.data_at(k) - mean) / std::sqrt(var + double(0.001f)),
                    tol);
      }
    EXPECT_NEAR(layer->blobs()[0]->data_at(c), mean, tol);
    EXPECT_NEAR(layer->blobs()[1]->data_at(c), var * m / (m - 1), tol);
  }
  EXPECT_NEAR(layer->blobs()[2]->data_at(0), 1, tol);
  // A second batch: the averages decay by 0.9.
  std::vector<double> old_mean = {layer->blobs()[0]->data_at(0), layer->blobs()[0]->data_at(1)};
  std::vector<double> old_var = {layer->blobs()[1]->data_at(0), layer->blobs()[1]->data_at(1)};
  FillUniform(&bottom, -1, 1, 99);
  layer->Forward({&bottom}, {&top});
  EXPECT_NEAR(layer->blobs()[2]->data_at(0), 1 + double(0.9f), tol);
  for (int c = 0; c < 2; ++c) {
    double mean, var;
    ChannelStats(bottom, c, &mean, &var);
    EXPECT_NEAR(layer->blobs()[0]->data_at(c), double(0.9f) * old_mean[c] + mean, tol);
    EXPECT_NEAR(layer->blobs()[1]->data_at(c), double(0.9f) * old_var[c] + var * m / (m - 1), tol);
  }
  // Backward: Caffe's formula, and no diff for the statistics.
  for (int64_t i = 0; i < top.count(); ++i)
    CREMA_DISPATCH_FLOAT(dtype, T, top.mutable_cpu_diff<T>()[i] = static_cast<T>(std::sin(i)));
  for (auto& blob : layer->blobs()) blob->SetDiffZero();
  layer->set_param_propagate_down(0, true);
  layer->Backward({&top}, {true}, {&bottom});
  for (int c = 0; c < 2; ++c) {
    double mean, var, mean_dy = 0, mean_dy_y = 0;
    ChannelStats(bottom, c, &mean, &var);
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) {
        const int64_t k = (n * 2 + c) * 6 + i;
        mean_dy += top.diff_at(k) / m;
        mean_dy_y += top.diff_at(k) * top.data_at(k) / m;
      }
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 6; ++i) {
        const int64_t k = (n * 2 + c) * 6 + i;
        const double expected = (top.diff_at(k) - mean_dy - top.data_at(k) * mean_dy_y) /
                                std::sqrt(var + double(0.001f));
        EXPECT_NEAR(bottom.diff_at(k), expected, 10 * tol) << k;
      }
  }
  for (auto& blob : layer->blobs()) EXPECT_EQ(blob->asum_diff(), 0.0);
}

// The statistics are taken in one pass around a value of the channel: a mean far larger than the
// spread (1e6 against 1e-3, a ratio E[x^2] - E[x]^2 alone would lose entirely in double) still
// gives the variance of the two-pass formula.
TEST(BatchNormLayer, VarianceOfAFarOffMeanKeepsItsDigits) {
  auto layer =
      testing::CreateLayer("type: 'BatchNorm' batch_norm_param { eps: 0 }", DataType::kFloat64);
  Blob bottom(std::vector<int>{4, 2, 3, 5}, DataType::kFloat64), top(DataType::kFloat64);
  FillUniform(&bottom, -1e-3, 1e-3);
  for (int64_t i = 0; i < bottom.count(); ++i)
    bottom.mutable_cpu_data<double>()[i] += (i / 15) % 2 == 0 ? 1e6 : -3e5;
  layer->SetUp({&bottom}, {&top});
  layer->Forward({&bottom}, {&top});
  const int m = 4 * 15;
  for (int c = 0; c < 2; ++c) {
    double mean, var;
    ChannelStats(bottom, c, &mean, &var);
    ASSERT_GT(var, 1e-8);
    EXPECT_NEAR(layer->blobs()[0]->data_at(c), mean, 1e-9);
    EXPECT_NEAR(layer->blobs()[1]->data_at(c), var * m / (m - 1), 1e-6 * var);
    for (int64_t i = 0; i < 15; ++i) {
      const int64_t k = c * 15 + i;
      EXPECT_NEAR(top.data_at(k), (bottom.data_at(k) - mean) / std::sqrt(var), 1e-5);
    }
  }
}

TEST_P(BatchNormValues, GlobalStatistics) {
  const DataType dtype = GetParam();
  const double tol = dtype == DataType::kFloat64 ? 1e-12 : 2e-6;
  LayerParameter param = testing::ParseLayerParam(WithStats("type: 'BatchNorm' phase: TEST"));
  auto layer = LayerRegistry::Create(param);
  layer->set_dtype(dtype);
  Blob bottom(std::vector<int>{2, 3, 2}, dtype), top(dtype);
  FillUniform(&bottom, -1, 1);
  layer->SetUp({&bottom}, {&top});
  layer->Forward({&bottom}, {&top});
  // The stored statistics are float32 values divided by the factor 2.
  const double mean[] = {0.2f / 2.0, -0.1f / 2.0, 0.4f / 2.0},
               var[] = {1.5f / 2.0, 0.6f / 2.0, 2.2f / 2.0};
  for (int64_t k = 0; k < bottom.count(); ++k) {
    const int c = static_cast<int>(k / 2 % 3);
    EXPECT_NEAR(top.data_at(k), (bottom.data_at(k) - mean[c]) / std::sqrt(var[c] + double(1e-5f)),
                tol);
  }
  // The statistics are left alone.
  EXPECT_NEAR(layer->blobs()[0]->data_at(0), 0.2, 1e-7);
  EXPECT_EQ(layer->blobs()[2]->data_at(0), 2.0);
  // A zero factor reads as zero statistics: y = x / sqrt(eps).
  CREMA_DISPATCH_FLOAT(dtype, T, layer->blobs()[2]->mutable_cpu_data<T>()[0] = T(0));
  layer->Forward({&bottom}, {&top});
  for (int64_t k = 0; k < bottom.count(); ++k)
    EXPECT_NEAR(top.data_at(k), bottom.data_at(k) / std::sqrt(double(1e-5f)), 1e3 * tol);
}

INSTANTIATE_TEST_SUITE_P(Types, BatchNormValues,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64));

TEST(BatchNormLayer, PhaseDecidesStatistics) {
  for (auto [text, expected] : std::vector<std::pair<std::string, bool>>{
           {"phase: TRAIN", false},
           {"phase: TEST", true},
           {"phase: TRAIN batch_norm_param { use_global_stats: true }", true},
           {"phase: TEST batch_norm_param { use_global_stats: false }", false}}) {
    auto layer = testing::CreateLayer("type: 'BatchNorm' " + text, DataType::kFloat32);
    Blob bottom(std::vector<int>{2, 2}), top;
    layer->SetUp({&bottom}, {&top});
    EXPECT_EQ(static_cast<BatchNormLayer*>(layer.get())->use_global_stats(), expected) << text;
  }
}

TEST(BatchNormLayer, InPlaceSurvivesLaterOverwrite) {
  // A later in-place layer (Scale) overwrites the top; Backward must still use y.
  auto layer = testing::CreateLayer("type: 'BatchNorm'");
  auto reference = testing::CreateLayer("type: 'BatchNorm'");
  Blob a(std::vector<int>{4, 2, 3}, DataType::kFloat64), b(a.shape(), DataType::kFloat64),
      top(DataType::kFloat64);
  FillUniform(&a, -1, 1);
  b.CopyFrom(a);
  layer->SetUp({&a}, {&a});
  reference->SetUp({&b}, {&top});
  layer->Forward({&a}, {&a});
  reference->Forward({&b}, {&top});
  a.scale_data(3.0);
  for (int64_t i = 0; i < a.count(); ++i) {
    a.mutable_cpu_diff<double>()[i] = std::cos(i);
    top.mutable_cpu_diff<double>()[i] = std::cos(i);
  }
  layer->Backward({&a}, {true}, {&a});
  reference->Backward({&top}, {true}, {&b});
  for (int64_t i = 0; i < a.count(); ++i) EXPECT_NEAR(a.diff_at(i), b.diff_at(i), 1e-12);
}

TEST(BatchNormErrors, Parameters) {
  ExpectSetUpError("type: 'BatchNorm' param { lr_mult: 1 }", {{2, 3}}, "param[0].lr_mult");
  ExpectSetUpError("type: 'BatchNorm' param { lr_mult: 0 } param { lr_mult: 0 } param { }",
                   {{2, 3}}, "param[2].lr_mult");
  ExpectSetUpError("type: 'BatchNorm' blobs { shape { dim: 3 } }", {{2, 3}}, "blobs");
  ExpectSetUpError(WithStats("type: 'BatchNorm'"), {{2, 4, 2}}, "blobs");
}

TEST(BatchNormErrors, Shapes) {
  auto layer = testing::CreateLayer("name: 'bn' type: 'BatchNorm'");
  Blob bottom(std::vector<int>{2, 3, 4}, DataType::kFloat64), top(DataType::kFloat64);
  layer->SetUp({&bottom}, {&top});
  bottom.Reshape({2, 4, 4});
  EXPECT_THROW(layer->Reshape({&bottom}, {&top}), ConfigError);
  Blob scalar(std::vector<int>{}, DataType::kFloat64);
  auto other = testing::CreateLayer("name: 'bn' type: 'BatchNorm'");
  EXPECT_THROW(other->SetUp({&scalar}, {&top}), ConfigError);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diffs, param diffs) ----

TEST(BatchNormCaffe, GlobalStats) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  auto layer =
      RunZooCase(dir, ZooCase{"bn_global",
                              {{"fwd/011_conv_a__top0_conv_a.f32", {2, 6, 8, 8}}},
                              "fwd/053_bn_global__top0_bn_global.f32",
                              "bwd/058_scale_bias__bottom0_bn_global.f32",
                              {"bwd/053_bn_global__bottom0_conv_a_conv_a_0_split_9.f32"},
                              {"grad/053_bn_global__param0.f32", "grad/053_bn_global__param1.f32",
                               "grad/053_bn_global__param2.f32"}});
  for (int p = 0; p < 3; ++p)
    ExpectNearRef(*layer->blobs()[p],
                  StrCat(dir, "/params_after_forward/053_bn_global__param", p, ".f32"), false);
}

TEST(BatchNormCaffe, BatchStatsAndMovingAverages) {
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  auto layer =
      RunZooCase(dir, ZooCase{"bn_batch",
                              {{"fwd/013_conv_g__top0_conv_g.f32", {2, 4, 4, 4}}},
                              "fwd/054_bn_batch__top0_bn_batch.f32",
                              "bwd/061_scale_by_blob__bottom0_bn_batch.f32",
                              {"bwd/054_bn_batch__bottom0_conv_g_conv_g_0_split_5.f32"},
                              {"grad/054_bn_batch__param0.f32", "grad/054_bn_batch__param1.f32",
                               "grad/054_bn_batch__param2.f32"}});
  for (int p = 0; p < 3; ++p)
    ExpectNearRef(*layer->blobs()[p],
                  StrCat(dir, "/params_after_forward/054_bn_batch__param", p, ".f32"), false);
}

}  // namespace
}  // namespace crema

namespace crema {
namespace {

// The layer's float results, bit for bit, against the plain serial loops (one double chain per
// channel in the order image, position), with 1 and 2 threads, on a blob big enough for the
// parallel path and with a channel count (7) that is not a multiple of the four-channel blocks.
TEST(BatchNormLayer, ThreadedLoopsMatchSerialLoopsExactly) {
  const int num = 3, channels = 7, spatial = 61 * 67;
  const int64_t count = int64_t{num} * channels * spatial;
  const int saved_threads = CpuThreads();
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    auto layer = testing::CreateLayer(
        "type: 'BatchNorm' batch_norm_param { moving_average_fraction: 0.9 eps: 0.001 }",
        DataType::kFloat32);
    Blob bottom(std::vector<int>{num, channels, 61, 67}, DataType::kFloat32),
        top(DataType::kFloat32);
    FillUniform(&bottom, -2, 3, 7);
    layer->SetUp({&bottom}, {&top});
    layer->Forward({&bottom}, {&top});
    const float* x = bottom.cpu_data<float>();
    std::vector<float> y(count);
    std::vector<double> inv_std(channels);
    for (int c = 0; c < channels; ++c) {
      double mean = 0, var = 0;
      for (int n = 0; n < num; ++n)
        for (int i = 0; i < spatial; ++i) mean += x[(int64_t{n} * channels + c) * spatial + i];
      mean /= double(count / channels);
      for (int n = 0; n < num; ++n)
        for (int i = 0; i < spatial; ++i) {
          const float v = x[(int64_t{n} * channels + c) * spatial + i];
          var += (v - mean) * (v - mean);
        }
      var /= double(count / channels);
      const double m = double(count / channels);
      EXPECT_EQ(layer->blobs()[0]->cpu_data<float>()[c], static_cast<float>(mean)) << c;
      EXPECT_EQ(layer->blobs()[1]->cpu_data<float>()[c], static_cast<float>(m / (m - 1) * var))
          << c;
      inv_std[c] = 1 / std::sqrt(var + double(0.001f));
      for (int n = 0; n < num; ++n)
        for (int i = 0; i < spatial; ++i) {
          const int64_t k = (int64_t{n} * channels + c) * spatial + i;
          y[k] = (x[k] - static_cast<float>(mean)) * static_cast<float>(inv_std[c]);
        }
    }
    int mismatches = 0;
    for (int64_t k = 0; k < count; ++k) mismatches += top.cpu_data<float>()[k] != y[k];
    EXPECT_EQ(mismatches, 0) << threads << " threads";

    float* dy = top.mutable_cpu_diff<float>();
    for (int64_t k = 0; k < count; ++k) dy[k] = static_cast<float>(std::sin(0.37 * k));
    layer->Backward({&top}, {true}, {&bottom});
    mismatches = 0;
    for (int c = 0; c < channels; ++c) {
      double sum_dy = 0, sum_dy_y = 0;
      for (int n = 0; n < num; ++n)
        for (int i = 0; i < spatial; ++i) {
          const int64_t k = (int64_t{n} * channels + c) * spatial + i;
          sum_dy += dy[k];
          sum_dy_y += static_cast<double>(dy[k]) * y[k];
        }
      const double m = double(count / channels);
      const float mean_dy = static_cast<float>(sum_dy / m);
      const float mean_dy_y = static_cast<float>(sum_dy_y / m);
      for (int n = 0; n < num; ++n)
        for (int i = 0; i < spatial; ++i) {
          const int64_t k = (int64_t{n} * channels + c) * spatial + i;
          const float expected =
              (dy[k] - mean_dy - y[k] * mean_dy_y) * static_cast<float>(inv_std[c]);
          mismatches += bottom.cpu_diff<float>()[k] != expected;
        }
    }
    EXPECT_EQ(mismatches, 0) << threads << " threads";
  }
  SetCpuThreads(saved_threads);
}

}  // namespace
}  // namespace crema
