#include "layers/inner_product/inner_product_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

#define CREMA_IP_FILLERS \
  " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } "

CREMA_LAYER_CONFORMANCE(
    InnerProduct,
    LayerCase("inner_product_param { num_output: 5" CREMA_IP_FILLERS "}", {{3, 4}}).Name("matrix"),
    LayerCase("inner_product_param { num_output: 4" CREMA_IP_FILLERS "}", {{2, 3, 4, 5}})
        .Name("flatten_4d"),
    LayerCase("inner_product_param { num_output: 4 transpose: true" CREMA_IP_FILLERS "}",
              {{2, 3, 2, 2}})
        .Name("transpose"),
    LayerCase("inner_product_param { num_output: 3 bias_term: false" CREMA_IP_FILLERS "}", {{2, 6}})
        .Name("no_bias"),
    LayerCase("inner_product_param { num_output: 3 axis: 2" CREMA_IP_FILLERS "}", {{2, 3, 4, 2}})
        .Name("axis2"),
    LayerCase("inner_product_param { num_output: 3 axis: -1 transpose: true bias_term: "
              "false" CREMA_IP_FILLERS "}",
              {{2, 2, 5}})
        .Name("axis_last_transpose_no_bias"),
    LayerCase("inner_product_param { num_output: 2 axis: 0" CREMA_IP_FILLERS "}", {{3, 2, 2}})
        .Name("axis0"));

namespace crema {
namespace {

using testing::FillUniform;
using testing::ParseLayerParam;

// Forward by hand: top[m][n] = sum_k x[m][k] * W[n][k] (W[k][n] when transposed) + b[n].
void CheckAgainstLoops(const std::string& body, const std::vector<int>& shape, int axis,
                       DataType dtype) {
  SCOPED_TRACE(body);
  LayerParameter param = ParseLayerParam("type: 'InnerProduct' inner_product_param { " + body +
                                         CREMA_IP_FILLERS + " }");
  InnerProductLayer layer(param);
  layer.set_dtype(dtype);
  Blob bottom(shape, dtype), top(dtype);
  FillUniform(&bottom, -1, 1);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  const int64_t m = bottom.count(0, axis), k = bottom.count(axis);
  const int n = static_cast<int>(param.inner_product_param().num_output());
  const bool transpose = param.inner_product_param().transpose();
  const bool bias = param.inner_product_param().bias_term();
  std::vector<int> top_shape(shape.begin(), shape.begin() + axis);
  top_shape.push_back(n);
  ASSERT_EQ(top.shape(), top_shape);
  const Blob& w = *layer.blobs()[0];
  EXPECT_EQ(w.shape(), transpose ? (std::vector<int>{static_cast<int>(k), n})
                                 : (std::vector<int>{n, static_cast<int>(k)}));
  ASSERT_EQ(layer.blobs().size(), bias ? 2u : 1u);
  const double tolerance = dtype == DataType::kFloat64 ? 1e-12 : 1e-5;
  for (int64_t i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = bias ? layer.blobs()[1]->data_at(j) : 0.0;
      for (int64_t l = 0; l < k; ++l)
        sum += bottom.data_at(i * k + l) * w.data_at(transpose ? l * n + j : j * k + l);
      EXPECT_NEAR(top.data_at(i * n + j), sum, tolerance * std::max(1.0, std::abs(sum)));
    }
  }
  // Backward by hand too: dW, db accumulate; dx = dy * W.
  Blob& t = top;
  FillUniform(&t, -1, 1, 99);
  for (int64_t i = 0; i < t.count(); ++i) {
    CREMA_DISPATCH_FLOAT(dtype, T, t.mutable_cpu_diff<T>()[i] = static_cast<T>(t.data_at(i)));
  }
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  for (int64_t l = 0; l < k; ++l) {
    for (int j = 0; j < n; ++j) {
      double dw = 0;
      for (int64_t i = 0; i < m; ++i) dw += top.diff_at(i * n + j) * bottom.data_at(i * k + l);
      EXPECT_NEAR(w.diff_at(transpose ? l * n + j : j * k + l), dw,
                  tolerance * std::max(1.0, std::abs(dw)));
    }
  }
  if (bias) {
    for (int j = 0; j < n; ++j) {
      double db = 0;
      for (int64_t i = 0; i < m; ++i) db += top.diff_at(i * n + j);
      EXPECT_NEAR(layer.blobs()[1]->diff_at(j), db, tolerance * std::max(1.0, std::abs(db)));
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t l = 0; l < k; ++l) {
      double dx = 0;
      for (int j = 0; j < n; ++j)
        dx += top.diff_at(i * n + j) * w.data_at(transpose ? l * n + j : j * k + l);
      EXPECT_NEAR(bottom.diff_at(i * k + l), dx, tolerance * std::max(1.0, std::abs(dx)));
    }
  }
}

TEST(InnerProductValues, MatchesLoops) {
  for (DataType dtype : {DataType::kFloat64, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    CheckAgainstLoops("num_output: 5", {3, 4}, 1, dtype);
    CheckAgainstLoops("num_output: 4", {2, 3, 2, 2}, 1, dtype);
    CheckAgainstLoops("num_output: 4 transpose: true", {2, 3, 2, 2}, 1, dtype);
    CheckAgainstLoops("num_output: 3 bias_term: false", {5, 6}, 1, dtype);
    CheckAgainstLoops("num_output: 3 axis: 2", {2, 3, 4, 2}, 2, dtype);
    CheckAgainstLoops("num_output: 3 axis: -1 transpose: true", {2, 3, 4}, 2, dtype);
    CheckAgainstLoops("num_output: 2 axis: 0", {3, 2, 2}, 0, dtype);
  }
}

TEST(InnerProductValues, ByHand) {
  LayerParameter param = ParseLayerParam(
      "type: 'InnerProduct' inner_product_param { num_output: 2 "
      "bias_filler { type: 'constant' value: 0.5 } }");
  BlobProto* w = param.add_blobs();
  w->mutable_shape()->add_dim(2);
  w->mutable_shape()->add_dim(3);
  for (float v : {1.f, 2.f, 3.f, -1.f, 0.f, 1.f}) w->add_data(v);
  BlobProto* b = param.add_blobs();
  b->mutable_shape()->add_dim(2);
  b->add_data(10.f);
  b->add_data(-10.f);
  InnerProductLayer layer(param);
  Blob bottom(std::vector<int>{1, 3}), top;
  for (int i = 0; i < 3; ++i) bottom.mutable_cpu_data<float>()[i] = i + 1.0f;  // x = 1 2 3
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  // Loaded weights win over the filler: 1+4+9+10 = 24, -1+0+3-10 = -8.
  EXPECT_EQ(top.data_at(0), 24.0);
  EXPECT_EQ(top.data_at(1), -8.0);
}

TEST(InnerProductBackward, ParamDiffsAccumulate) {
  LayerParameter param = ParseLayerParam(
      "type: 'InnerProduct' inner_product_param { num_output: 3" CREMA_IP_FILLERS "}");
  InnerProductLayer layer(param);
  Blob bottom(std::vector<int>{2, 4}), top;
  FillUniform(&bottom, -1, 1);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  for (int64_t i = 0; i < top.count(); ++i) top.mutable_cpu_diff<float>()[i] = 0.25f * (i + 1);
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  const double w1 = layer.blobs()[0]->asum_diff(), b1 = layer.blobs()[1]->asum_diff();
  const double x1 = bottom.asum_diff();
  ASSERT_GT(w1, 0);
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_NEAR(layer.blobs()[0]->asum_diff(), 2 * w1, 1e-5);
  EXPECT_NEAR(layer.blobs()[1]->asum_diff(), 2 * b1, 1e-5);
  EXPECT_NEAR(bottom.asum_diff(), x1, 1e-5);  // overwritten
  // param_propagate_down false: that diff is left alone.
  layer.set_param_propagate_down(0, false);
  layer.Backward({&top}, {false}, {&bottom});
  EXPECT_NEAR(layer.blobs()[0]->asum_diff(), 2 * w1, 1e-5);
  EXPECT_NEAR(layer.blobs()[1]->asum_diff(), 3 * b1, 1e-5);
}

TEST(InnerProductShape, BatchMayChangeInnerMayNot) {
  LayerParameter param =
      ParseLayerParam("name: 'fc' type: 'InnerProduct' inner_product_param { num_output: 7 }");
  InnerProductLayer layer(param);
  Blob bottom(std::vector<int>{2, 3, 4}), top;
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 7}));
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{7, 12}));
  bottom.Reshape({5, 12});
  layer.Reshape({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (std::vector<int>{5, 7}));
  bottom.Reshape({5, 3, 5});
  try {
    layer.Reshape({&bottom}, {&top});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("15"), std::string::npos) << what;
    EXPECT_NE(what.find("12"), std::string::npos) << what;
    EXPECT_NE(what.find("layer \"fc\" (InnerProduct)"), std::string::npos) << what;
  }
}

void ExpectParamError(const std::string& text, const std::vector<int>& shape,
                      const std::string& field) {
  SCOPED_TRACE(text);
  LayerParameter param = ParseLayerParam("name: 'bad' type: 'InnerProduct' " + text);
  auto layer = LayerRegistry::Create(param);
  Blob bottom(shape), top;
  try {
    layer->SetUp({&bottom}, {&top});
    ADD_FAILURE() << "expected a ConfigError mentioning " << field;
  } catch (const ConfigError& e) {
    if (std::getenv("CREMA_PRINT_ERRORS")) std::printf("%s\n", e.what());
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (InnerProduct)"), std::string::npos)
        << e.what();
  }
}

TEST(InnerProductErrors, Parameters) {
  ExpectParamError("inner_product_param { }", {2, 3}, "inner_product_param.num_output");
  ExpectParamError("inner_product_param { num_output: 0 }", {2, 3},
                   "inner_product_param.num_output");
  ExpectParamError("inner_product_param { num_output: 2 axis: 2 }", {2, 3},
                   "inner_product_param.axis");
  ExpectParamError("inner_product_param { num_output: 2 axis: -3 }", {2, 3},
                   "inner_product_param.axis");
  ExpectParamError("inner_product_param { num_output: 2 weight_filler { type: 'bogus' } }", {2, 3},
                   "inner_product_param.weight_filler");
  // Loaded weights of the wrong shape: both shapes named.
  ExpectParamError(
      "inner_product_param { num_output: 2 bias_term: false } "
      "blobs { shape { dim: 3 dim: 2 } data: [1, 2, 3, 4, 5, 6] }",
      {4, 3}, "expected (2 3), got (3 2)");
  ExpectParamError(
      "inner_product_param { num_output: 2 } "
      "blobs { shape { dim: 2 dim: 3 } data: [1, 2, 3, 4, 5, 6] }",
      {4, 3}, "blobs");
  LayerParameter param =
      ParseLayerParam("type: 'InnerProduct' inner_product_param { num_output: 2 }");
  InnerProductLayer layer(param);
  Blob bottom(std::vector<int>{2, 3});
  EXPECT_THROW(layer.SetUp({&bottom}, {&bottom}), ConfigError);
  EXPECT_FALSE(layer.AllowsInPlace());
}

TEST(InnerProductWeights, LegacyShapeAndTransposeLoad) {
  // Caffe V1 files store IP weights as (1, 1, N, K) and bias as (1, 1, 1, N).
  LayerParameter param = ParseLayerParam(
      "type: 'InnerProduct' inner_product_param { num_output: 2 } "
      "blobs { num: 1 channels: 1 height: 2 width: 2 data: [1, 2, 3, 4] } "
      "blobs { num: 1 channels: 1 height: 1 width: 2 data: [0.5, -0.5] }");
  InnerProductLayer layer(param);
  layer.set_dtype(DataType::kFloat64);
  Blob bottom(std::vector<int>{1, 2}, DataType::kFloat64), top(DataType::kFloat64);
  bottom.mutable_cpu_data<double>()[0] = 1;
  bottom.mutable_cpu_data<double>()[1] = -1;
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(layer.blobs()[0]->shape(), (std::vector<int>{2, 2}));
  EXPECT_EQ(layer.blobs()[0]->dtype(), DataType::kFloat64);
  layer.Forward({&bottom}, {&top});
  EXPECT_DOUBLE_EQ(top.data_at(0), 1 - 2 + 0.5);
  EXPECT_DOUBLE_EQ(top.data_at(1), 3 - 4 - 0.5);
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward, bottom diff, param diffs) ----

void ExpectNearRef(const Blob& actual, const std::string& path, bool diff) {
  const std::vector<float> expected = testing::ReadF32(path);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << path;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    ASSERT_NEAR(a, expected[i], 2e-5 * std::max(scale, 1e-3)) << path << " at " << i;
  }
}

struct ZooCase {
  const char* layer;
  const char* bottom;
  std::vector<int> bottom_shape;
  const char* top;
  const char* top_diff;
  const char* bottom_diff;
  int num_params;
};
void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.layer; }

class InnerProductCaffeTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(InnerProductCaffeTest, MatchesLayerZoo) {
  const ZooCase& c = GetParam();
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/layer_zoo");
  NetParameter net;
  {
    std::ifstream in(dir + "/layer_zoo.caffemodel", std::ios::binary);
    ASSERT_TRUE(net.ParseFromIstream(&in));
  }
  const LayerParameter* found = nullptr;
  for (const LayerParameter& l : net.layer())
    if (l.name() == c.layer) found = &l;
  ASSERT_NE(found, nullptr) << c.layer;
  InnerProductLayer layer(*found);
  Blob bottom(c.bottom_shape), top;
  const std::vector<float> bottom_values = testing::ReadF32(dir + "/" + c.bottom);
  ASSERT_EQ(static_cast<int64_t>(bottom_values.size()), bottom.count());
  std::copy(bottom_values.begin(), bottom_values.end(), bottom.mutable_cpu_data<float>());
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  ExpectNearRef(top, dir + "/" + c.top, false);
  const std::vector<float> top_diff = testing::ReadF32(dir + "/" + c.top_diff);
  ASSERT_EQ(static_cast<int64_t>(top_diff.size()), top.count());
  std::copy(top_diff.begin(), top_diff.end(), top.mutable_cpu_diff<float>());
  ASSERT_EQ(static_cast<int>(layer.blobs().size()), c.num_params);
  for (auto& blob : layer.blobs()) blob->SetDiffZero();
  layer.Backward({&top}, {true}, {&bottom});
  ExpectNearRef(bottom, dir + "/" + c.bottom_diff, true);
  const std::string index = std::string(c.top).substr(4, 3);
  for (int p = 0; p < c.num_params; ++p)
    ExpectNearRef(*layer.blobs()[p],
                  StrCat(dir, "/grad/", index, "_", c.layer, "__param", p, ".f32"), true);
}

INSTANTIATE_TEST_SUITE_P(
    LayerZoo, InnerProductCaffeTest,
    ::testing::Values(ZooCase{"ip",
                              "fwd/122_head_concat__top0_head_concat.f32",
                              {2, 214},
                              "fwd/124_ip__top0_ip.f32",
                              "bwd/125_ip_ip_0_split__bottom0_ip.f32",
                              "bwd/124_ip__bottom0_head_concat_head_concat_0_split_0.f32",
                              2},
                      ZooCase{"ip_t",
                              "fwd/122_head_concat__top0_head_concat.f32",
                              {2, 214},
                              "fwd/126_ip_t__top0_ip_t.f32",
                              "bwd/127_ip_t_ip_t_0_split__bottom0_ip_t.f32",
                              "bwd/126_ip_t__bottom0_head_concat_head_concat_0_split_1.f32",
                              1},
                      ZooCase{"ip_axis",
                              "fwd/089_softmax_ax2__top0_softmax_ax2.f32",
                              {2, 5, 8, 8},
                              "fwd/128_ip_axis__top0_ip_axis.f32",
                              "bwd/133_ip_c__bottom0_ip_axis.f32",
                              "bwd/128_ip_axis__bottom0_softmax_ax2.f32",
                              2},
                      ZooCase{"ip_c",
                              "fwd/128_ip_axis__top0_ip_axis.f32",
                              {2, 5, 3},
                              "fwd/133_ip_c__top0_ip_c.f32",
                              "bwd/141_loss_contrastive__bottom1_ip_c.f32",
                              "bwd/133_ip_c__bottom0_ip_axis.f32",
                              2}),
    [](const ::testing::TestParamInfo<ZooCase>& info) { return std::string(info.param.layer); });

}  // namespace
}  // namespace crema
