#include "layers/pooling/pooling_layer.hpp"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "math/cpu_isa.hpp"
#include "support/gradient_checker.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    Pooling,
    LayerCase("pooling_param { pool: MAX kernel_size: 3 stride: 2 }", {{2, 3, 6, 5}}).Name("max"),
    LayerCase("pooling_param { pool: MAX kernel_size: 3 stride: 2 }", {{2, 3, 6, 5}})
        .Tops(2)
        .Name("max_mask_top"),
    LayerCase("pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", {{2, 2, 7, 6}})
        .Name("max_pad"),
    LayerCase("pooling_param { pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 "
              "pad_h: 1 pad_w: 1 }",
              {{1, 2, 5, 7}})
        .Name("max_rect"),
    LayerCase("pooling_param { pool: MAX kernel_size: 2 stride: 3 }", {{2, 2, 8, 8}})
        .Name("max_ceil"),
    LayerCase("pooling_param { pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR }",
              {{2, 2, 8, 7}})
        .Name("max_floor"),
    LayerCase("pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }", {{2, 3, 7, 6}})
        .Name("ave_pad"),
    LayerCase("pooling_param { pool: AVE kernel_size: 3 stride: 2 }", {{2, 3, 8, 6}})
        .Name("ave_ceil"),
    LayerCase("pooling_param { pool: AVE kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 }",
              {{2, 2, 4, 7}})
        .Name("ave_rect"),
    LayerCase("pooling_param { pool: AVE kernel_size: 2 stride: 2 pad: 1 round_mode: FLOOR }",
              {{1, 2, 5, 6}})
        .Name("ave_pad_floor"),
    LayerCase("pooling_param { pool: AVE global_pooling: true }", {{2, 3, 4, 5}})
        .Name("global_ave"),
    LayerCase("pooling_param { pool: MAX global_pooling: true }", {{2, 3, 4, 5}})
        .Name("global_max"),
    LayerCase("pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 }", {{2, 2, 5, 4}})
        .Range(0.1, 1.0)
        .Phase(TEST)
        .Name("stochastic_test"),
    LayerCase("pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }", {{2, 2, 5, 5}})
        .Range(0.1, 1.0)
        .Phase(TRAIN)
        .Name("stochastic_train"));

namespace crema {
namespace {

using testing::ParseLayerParam;

struct Pooled {
  std::unique_ptr<PoolingLayer> layer;
  Blob bottom{DataType::kFloat64};
  Blob top{DataType::kFloat64};
  Blob mask{DataType::kFloat64};
};

// A float64 pooling layer on `values` (shape `shape`), forwarded once.
std::unique_ptr<Pooled> Pool(const std::string& body, const std::vector<int>& shape,
                             const std::vector<double>& values, bool mask_top = false,
                             Phase phase = TRAIN) {
  auto p = std::make_unique<Pooled>();
  LayerParameter param =
      ParseLayerParam("name: 'pool' type: 'Pooling' pooling_param { " + body + " }");
  param.set_phase(phase);
  p->layer = std::make_unique<PoolingLayer>(param);
  p->layer->set_dtype(DataType::kFloat64);
  p->bottom.Reshape(shape);
  for (size_t i = 0; i < values.size(); ++i) p->bottom.mutable_cpu_data<double>()[i] = values[i];
  BlobVec top = {&p->top};
  if (mask_top) top.push_back(&p->mask);
  p->layer->SetUp({&p->bottom}, top);
  p->layer->Forward({&p->bottom}, top);
  return p;
}

std::vector<double> Iota(int n, double start = 1) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

void ExpectValues(const Blob& blob, const std::vector<double>& expected, bool diff = false) {
  ASSERT_EQ(blob.count(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(diff ? blob.diff_at(i) : blob.data_at(i), expected[i], 1e-12) << "at " << i;
}

// x = 1..16 in a 4x4 plane. AVE 3x3 stride 2 pad 1: 3x3 output; Caffe divides by the window
// clipped to the padded image (9, 6 at the right/bottom edge where the window passes H + pad,
// 4 in the corner), summing only the cells inside the image.
TEST(PoolingValues, AveragePadByHand) {
  auto p = Pool("pool: AVE kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, Iota(16));
  EXPECT_EQ(p->top.shape(), (std::vector<int>{1, 1, 3, 3}));
  ExpectValues(p->top, {14.0 / 9, 30.0 / 9, 12.0 / 6, 57.0 / 9, 99.0 / 9, 36.0 / 6, 27.0 / 6,
                        45.0 / 6, 16.0 / 4});
  // Backward: each bottom cell collects top_diff / pool_size of every window covering it.
  for (int i = 0; i < 9; ++i) p->top.mutable_cpu_diff<double>()[i] = 1.0;
  p->layer->Backward({&p->top}, {true}, {&p->bottom});
  // Rows (and columns) 0..3 lie in windows {0}, {0, 1}, {1}, {1, 2}; window sizes 9 9 6 / 9 9 6 /
  // 6 6 4.
  const double a = 1.0 / 9, b = 1.0 / 6, c = 1.0 / 4;
  ExpectValues(p->bottom,
               {a, 2 * a, a, a + b,                           //
                2 * a, 4 * a, 2 * a, 2 * a + 2 * b,           //
                a, 2 * a, a, a + b,                           //
                a + b, 2 * a + 2 * b, a + b, a + 2 * b + c},  //
               true);
}

TEST(PoolingValues, AverageNoPadByHand) {
  // 2x3 window, stride 1x2 on a 3x5 plane: windows never clipped, divide by 6.
  auto p =
      Pool("pool: AVE kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2", {1, 1, 3, 5}, Iota(15));
  EXPECT_EQ(p->top.shape(), (std::vector<int>{1, 1, 2, 2}));
  ExpectValues(p->top, {(1 + 2 + 3 + 6 + 7 + 8) / 6.0, (3 + 4 + 5 + 8 + 9 + 10) / 6.0,
                        (6 + 7 + 8 + 11 + 12 + 13) / 6.0, (8 + 9 + 10 + 13 + 14 + 15) / 6.0});
}

TEST(PoolingValues, AverageCeilWindowClippedToImage) {
  // 3x3 stride 2 on 4x4, no pad: ceil(1/2) + 1 = 2 outputs; the last window covers rows 2..3
  // only, and (pad 0) is divided by its clipped size 2x2... as Caffe: hend = min(4, H + 0) = 4.
  auto p = Pool("pool: AVE kernel_size: 3 stride: 2", {1, 1, 4, 4}, Iota(16));
  EXPECT_EQ(p->top.shape(), (std::vector<int>{1, 1, 2, 2}));
  ExpectValues(p->top,
               {(1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11) / 9.0, (3 + 4 + 7 + 8 + 11 + 12) / 6.0,
                (9 + 10 + 11 + 13 + 14 + 15) / 6.0, (11 + 12 + 15 + 16) / 4.0});
}

TEST(PoolingValues, MaxPadByHandWithMask) {
  std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};  // 4x4
  auto p = Pool("pool: MAX kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, x, true);
  EXPECT_EQ(p->top.shape(), (std::vector<int>{1, 1, 3, 3}));
  // Windows (rows x cols): {0,1}x{0,1} {0,1}x{1,2,3} {0,1}x{3} | {1,2,3}x... | {3}x...
  ExpectValues(p->top, {9, 9, 6, 9, 9, 8, 9, 9, 3});
  // The first maximum wins ties: window (1, 0) holds 9 at indices 5 and 12 and takes 5.
  ExpectValues(p->mask, {5, 5, 7, 5, 5, 11, 12, 14, 15});
  for (int i = 0; i < 9; ++i) p->top.mutable_cpu_diff<double>()[i] = i + 1;
  p->layer->Backward({&p->top, &p->mask}, {true}, {&p->bottom});
  std::vector<double> expected(16, 0.0);
  expected[5] = 1 + 2 + 4 + 5;
  expected[7] = 3;
  expected[11] = 6;
  expected[12] = 7;
  expected[14] = 8;
  expected[15] = 9;
  ExpectValues(p->bottom, expected, true);
}

TEST(PoolingValues, MaxWithoutMaskTopSameGradient) {
  std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
  auto p = Pool("pool: MAX kernel_size: 3 stride: 2 pad: 1", {1, 1, 4, 4}, x);
  for (int i = 0; i < 9; ++i) p->top.mutable_cpu_diff<double>()[i] = i + 1;
  p->layer->Backward({&p->top}, {true}, {&p->bottom});
  EXPECT_DOUBLE_EQ(p->bottom.diff_at(5), 12);
  EXPECT_DOUBLE_EQ(p->bottom.diff_at(12), 7);
  EXPECT_DOUBLE_EQ(p->bottom.diff_at(14), 8);
  EXPECT_DOUBLE_EQ(p->bottom.diff_at(13), 0);
  EXPECT_DOUBLE_EQ(p->bottom.asum_diff(), 45);
}

TEST(PoolingValues, GlobalPerChannel) {
  std::vector<double> x = Iota(2 * 2 * 2 * 3);  // (2, 2, 2, 3): planes of 6
  auto ave = Pool("pool: AVE global_pooling: true", {2, 2, 2, 3}, x);
  EXPECT_EQ(ave->top.shape(), (std::vector<int>{2, 2, 1, 1}));
  ExpectValues(ave->top, {3.5, 9.5, 15.5, 21.5});
  auto max = Pool("pool: MAX global_pooling: true", {2, 2, 2, 3}, x);
  ExpectValues(max->top, {6, 12, 18, 24});
}

// Global AVE in float over 22 planes (groups of eight and six more) of 7 x 7, and a 3 x 3 window
// with padding 1 on 1 x 1 planes (one window counting the padding): each output is the plane's
// sum in raster order divided by the window's size, to the bit.
TEST(PoolingValues, GlobalAverageFloatSumsEachPlaneInOrder) {
  ScopedCpuEngine engine(CpuEngine::kCaffe);
  for (const auto& [body, shape] :
       {std::pair<std::string, std::vector<int>>{"pool: AVE global_pooling: true", {2, 11, 7, 7}},
        {"pool: AVE kernel_size: 3 pad: 1", {1, 9, 1, 1}}}) {
    SCOPED_TRACE(body);
    LayerParameter param =
        ParseLayerParam("name: 'pool' type: 'Pooling' pooling_param { " + body + " }");
    PoolingLayer layer(param);
    Blob bottom, top;
    bottom.Reshape(shape);
    float* x = bottom.mutable_cpu_data<float>();
    for (int i = 0; i < bottom.count(); ++i) x[i] = 1.f / static_cast<float>(i % 97 + 3) - 0.1f;
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    const int plane = shape[2] * shape[3];
    const float size = shape[2] == 1 ? 9.f : static_cast<float>(plane);
    ASSERT_EQ(top.count(), shape[0] * shape[1]);
    for (int p = 0; p < shape[0] * shape[1]; ++p) {
      float sum = 0;
      for (int i = 0; i < plane; ++i) sum += x[p * plane + i];
      EXPECT_EQ(top.cpu_data<float>()[p], sum / size) << "plane " << p;
    }
  }
}

TEST(PoolingValues, NegativeInputsMax) {
  auto p = Pool("pool: MAX kernel_size: 2 stride: 2", {1, 1, 2, 2}, {-5, -3, -4, -9});
  ExpectValues(p->top, {-3});
}

TEST(PoolingValues, StochasticTestFormula) {
  auto p =
      Pool("pool: STOCHASTIC kernel_size: 2 stride: 2", {1, 1, 2, 2}, {1, 2, 3, 4}, false, TEST);
  ExpectValues(p->top, {(1 + 4 + 9 + 16) / 10.0});
}

TEST(PoolingValues, StochasticTrainSamplesProportionally) {
  auto p = Pool("pool: STOCHASTIC kernel_h: 1 kernel_w: 2 stride: 2", {1, 1, 1, 2}, {1, 3});
  int picked_three = 0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    p->layer->Forward({&p->bottom}, {&p->top});
    const double y = p->top.data_at(0);
    ASSERT_TRUE(y == 1 || y == 3) << y;
    picked_three += y == 3;
    p->top.mutable_cpu_diff<double>()[0] = 1;
    p->layer->Backward({&p->top}, {true}, {&p->bottom});
    // The gradient goes to the sampled cell only.
    ASSERT_EQ(p->bottom.diff_at(y == 3 ? 1 : 0), 1.0);
    ASSERT_EQ(p->bottom.diff_at(y == 3 ? 0 : 1), 0.0);
  }
  EXPECT_NEAR(static_cast<double>(picked_three) / trials, 0.75, 0.03);
}

std::vector<int> OutputShape(const std::string& body, const std::vector<int>& shape) {
  LayerParameter param = ParseLayerParam("type: 'Pooling' pooling_param { " + body + " }");
  PoolingLayer layer(param);
  Blob bottom(shape), top;
  layer.SetUp({&bottom}, {&top});
  return top.shape();
}

TEST(PoolingShape, CaffeRounding) {
  // ceil((8 - 3) / 2) + 1 = 4; FLOOR gives 3.
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2", {1, 1, 8, 8}), (std::vector<int>{1, 1, 4, 4}));
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2 round_mode: FLOOR", {1, 1, 8, 8}),
            (std::vector<int>{1, 1, 3, 3}));
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2 round_mode: CEIL", {1, 1, 8, 8}),
            (std::vector<int>{1, 1, 4, 4}));
  // GoogLeNet pool1: 112 -> 56; AlexNet pool1: 55 -> 27.
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2", {1, 64, 112, 112}),
            (std::vector<int>{1, 64, 56, 56}));
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2", {1, 96, 55, 55}),
            (std::vector<int>{1, 96, 27, 27}));
  // pad 1: ceil((5 + 2 - 2) / 2) + 1 = 4, but the 4th window would start at 6 - 1 = 5, in the
  // padding: dropped.
  EXPECT_EQ(OutputShape("pool: AVE kernel_size: 2 stride: 2 pad: 1", {1, 1, 5, 5}),
            (std::vector<int>{1, 1, 3, 3}));
  // pad 1 without a drop: ceil((7 + 2 - 3) / 2) + 1 = 4.
  EXPECT_EQ(OutputShape("kernel_size: 3 stride: 2 pad: 1", {1, 1, 7, 7}),
            (std::vector<int>{1, 1, 4, 4}));
  // Rectangular, per axis.
  EXPECT_EQ(OutputShape("kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 1 pad_w: 0",
                        {2, 3, 4, 7}),
            (std::vector<int>{2, 3, 5, 3}));
  EXPECT_EQ(OutputShape("pool: AVE global_pooling: true", {3, 5, 7, 9}),
            (std::vector<int>{3, 5, 1, 1}));
  // Kernel larger than the input: ceil of a negative fraction is 0, so one output (as Caffe).
  EXPECT_EQ(OutputShape("kernel_size: 4 stride: 2", {1, 1, 3, 3}), (std::vector<int>{1, 1, 1, 1}));
}

TEST(PoolingShape, ReshapeFollowsBottomAndGlobalKernel) {
  LayerParameter param = ParseLayerParam(
      "type: 'Pooling' pooling_param { pool: MAX "
      "global_pooling: true }");
  PoolingLayer layer(param);
  Blob bottom(std::vector<int>{1, 2, 3, 3}), top, mask;
  layer.SetUp({&bottom}, {&top, &mask});
  EXPECT_EQ(mask.shape(), (std::vector<int>{1, 2, 1, 1}));
  bottom.Reshape({2, 2, 6, 5});
  layer.Reshape({&bottom}, {&top, &mask});
  EXPECT_EQ(top.shape(), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_EQ(mask.shape(), (std::vector<int>{2, 2, 1, 1}));
}

void ExpectParamError(const std::string& body, const std::string& field, int num_tops = 1,
                      const std::vector<int>& shape = {1, 2, 6, 6}) {
  SCOPED_TRACE(body);
  LayerParameter param =
      ParseLayerParam("name: 'bad' type: 'Pooling' pooling_param { " + body + " }");
  auto layer = LayerRegistry::Create(param);
  Blob bottom(shape), t0, t1, t2;
  BlobVec top = {&t0, &t1, &t2};
  top.resize(num_tops);
  try {
    layer->SetUp({&bottom}, top);
    ADD_FAILURE() << "expected a ConfigError mentioning " << field;
  } catch (const ConfigError& e) {
    if (std::getenv("CREMA_PRINT_ERRORS")) std::printf("%s\n", e.what());
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"bad\" (Pooling)"), std::string::npos) << e.what();
  }
}

TEST(PoolingErrors, Parameters) {
  ExpectParamError("stride: 2", "pooling_param.kernel_size");
  ExpectParamError("kernel_size: 0", "pooling_param.kernel_size");
  ExpectParamError("kernel_h: 0 kernel_w: 2", "pooling_param.kernel_h");
  ExpectParamError("kernel_size: 2 kernel_h: 2 kernel_w: 2", "pooling_param.kernel_size");
  ExpectParamError("kernel_h: 2", "pooling_param.kernel_h");
  ExpectParamError("global_pooling: true kernel_size: 2", "pooling_param.global_pooling");
  ExpectParamError("global_pooling: true stride: 2", "pooling_param.global_pooling");
  ExpectParamError("global_pooling: true pad: 1", "pooling_param.global_pooling");
  ExpectParamError("kernel_size: 3 stride: 0", "pooling_param.stride");
  ExpectParamError("kernel_size: 3 stride_h: 0 stride_w: 1", "pooling_param.stride_h");
  ExpectParamError("kernel_size: 3 stride_h: 2", "pooling_param.stride_h");
  ExpectParamError("kernel_size: 3 stride: 2 stride_h: 2 stride_w: 2", "pooling_param.stride");
  ExpectParamError("kernel_size: 3 pad: 1 pad_h: 1 pad_w: 1", "pooling_param.pad");
  ExpectParamError("kernel_size: 3 pad_w: 1", "pooling_param.pad_h");
  ExpectParamError("kernel_size: 3 pad: 3", "pooling_param.pad");
  ExpectParamError("kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 2", "pooling_param.pad_w");
  ExpectParamError("pool: STOCHASTIC kernel_size: 3 pad: 1", "pooling_param.pad");
}

TEST(PoolingErrors, BlobCountsAndShapes) {
  ExpectParamError("pool: AVE kernel_size: 2", "top", 2);  // mask only for MAX
  ExpectParamError("pool: MAX kernel_size: 2", "top", 3);
  ExpectParamError("kernel_size: 2", "4 axes", 1, {1, 2, 6});
  ExpectParamError("kernel_size: 2", "4 axes", 1, {1, 2, 6, 6, 6});
  LayerParameter param = ParseLayerParam("type: 'Pooling' pooling_param { kernel_size: 2 }");
  PoolingLayer layer(param);
  Blob bottom(std::vector<int>{1, 1, 4, 4});
  EXPECT_THROW(layer.SetUp({&bottom}, {&bottom}), ConfigError);
  EXPECT_FALSE(layer.AllowsInPlace());
}

// ---- against BVLC Caffe's own outputs (layer_zoo: forward and bottom diff) ----

struct ZooCase {
  const char* layer;
  const char* bottom;
  std::vector<int> bottom_shape;
  const char* top;
  const char* top_diff;
  const char* bottom_diff;
};
void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.layer; }

void ExpectNearRef(const Blob& actual, const std::string& path, bool diff) {
  const std::vector<float> expected = testing::ReadF32(path);
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.count()) << path;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = diff ? actual.diff_at(i) : actual.data_at(i);
    ASSERT_NEAR(a, expected[i], 1e-5 * std::max(scale, 1e-3)) << path << " at " << i;
  }
}

class PoolingCaffeTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(PoolingCaffeTest, MatchesLayerZoo) {
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
  PoolingLayer layer(*found);
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
  layer.Backward({&top}, {true}, {&bottom});
  ExpectNearRef(bottom, dir + "/" + c.bottom_diff, true);
}

INSTANTIATE_TEST_SUITE_P(
    LayerZoo, PoolingCaffeTest,
    ::testing::Values(ZooCase{"pool_max",
                              "fwd/021_relu_leaky__top0_relu_a.f32",
                              {2, 6, 8, 8},
                              "fwd/043_pool_max__top0_pool_max.f32",
                              "bwd/044_pool_max_pool_max_0_split__bottom0_pool_max.f32",
                              "bwd/043_pool_max__bottom0_relu_a_relu_leaky_0_split_0.f32"},
                      ZooCase{"pool_ave",
                              "fwd/011_conv_a__top0_conv_a.f32",
                              {2, 6, 8, 8},
                              "fwd/045_pool_ave__top0_pool_ave.f32",
                              "bwd/056_mvn_across__bottom0_pool_ave.f32",
                              "bwd/045_pool_ave__bottom0_conv_a_conv_a_0_split_6.f32"},
                      ZooCase{"pool_ave_nopad",
                              "fwd/015_conv_rect__top0_conv_rect.f32",
                              {2, 3, 4, 7},
                              "fwd/046_pool_ave_nopad__top0_pool_ave_nopad.f32",
                              "bwd/108_side_f4__bottom0_pool_ave_nopad.f32",
                              "bwd/046_pool_ave_nopad__bottom0_conv_rect_conv_rect_0_split_2.f32"},
                      ZooCase{"pool_max_ceil",
                              "fwd/011_conv_a__top0_conv_a.f32",
                              {2, 6, 8, 8},
                              "fwd/047_pool_max_ceil__top0_pool_max_ceil.f32",
                              "bwd/109_side_f5__bottom0_pool_max_ceil.f32",
                              "bwd/047_pool_max_ceil__bottom0_conv_a_conv_a_0_split_7.f32"},
                      ZooCase{"pool_global_ave",
                              "fwd/017_deconv__top0_deconv.f32",
                              {2, 3, 8, 8},
                              "fwd/048_pool_global_ave__top0_pool_global_ave.f32",
                              "bwd/076_tile__bottom0_pool_global_ave.f32",
                              "bwd/048_pool_global_ave__bottom0_deconv_deconv_0_split_1.f32"},
                      ZooCase{"pool_global_max",
                              "fwd/013_conv_g__top0_conv_g.f32",
                              {2, 4, 4, 4},
                              "fwd/049_pool_global_max__top0_pool_global_max.f32",
                              "bwd/059_gmax_flat__bottom0_pool_global_max.f32",
                              "bwd/049_pool_global_max__bottom0_conv_g_conv_g_0_split_4.f32"}),
    [](const ::testing::TestParamInfo<ZooCase>& info) { return std::string(info.param.layer); });

// MAX on rows long enough to go along the row (16 whole windows or more), with windows cut by
// padding at both edges and many ties (values from a few levels): the maxima and argmax of
// Caffe's loop, window by window in raster order with the first maximum kept; strides 1, 2, 3.
TEST(PoolingValues, MaxLongRowsMatchCaffesLoop) {
  const std::vector<int> shape = {2, 2, 11, 53};
  std::vector<double> x(2 * 2 * 11 * 53);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7919) % 5) - 2;
  for (int stride : {1, 2, 3}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    auto p =
        Pool("pool: MAX kernel_size: 3 pad: 1 stride: " + std::to_string(stride), shape, x, true);
    const int ph_n = p->top.shape(2), pw_n = p->top.shape(3), height = 11, width = 53;
    ASSERT_GE(pw_n, 17);
    for (int plane = 0; plane < 4; ++plane)
      for (int ph = 0; ph < ph_n; ++ph)
        for (int pw = 0; pw < pw_n; ++pw) {
          const int hs = std::max(ph * stride - 1, 0), he = std::min(ph * stride + 2, height);
          const int ws = std::max(pw * stride - 1, 0), we = std::min(pw * stride + 2, width);
          double best = -FLT_MAX;
          int at = -1;
          for (int h = hs; h < he; ++h)
            for (int w = ws; w < we; ++w)
              if (x[plane * height * width + h * width + w] > best) {
                best = x[plane * height * width + h * width + w];
                at = h * width + w;
              }
          const int64_t o = (static_cast<int64_t>(plane) * ph_n + ph) * pw_n + pw;
          EXPECT_EQ(p->top.data_at(o), best) << plane << " " << ph << " " << pw;
          EXPECT_EQ(p->mask.data_at(o), at) << plane << " " << ph << " " << pw;
        }
  }
}

// MAX 2x2 stride 2 in float with the argmax kept inside the layer (training) and without it
// (forward only), on rows of 8, 9, 12 and 13 pooled columns (the last a window cut by the image's
// edge), many ties, and windows of -inf and NaN only: crema's kernel at each CPU level gives the
// maxima of Caffe's loop (window in raster order, the first maximum kept, -FLT_MAX and no argmax
// where nothing beats it), and in training its Backward sends each top's gradient to that argmax.
TEST(PoolingValues, Max2x2FloatMatchesCaffesLoopAtEachCpuLevel) {
  ScopedCpuEngine engine(CpuEngine::kCaffe);
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2Fma, CpuIsa::kAvx512})
    for (bool forward_only : {false, true})
      for (int width : {16, 18, 24, 25}) {
        ScopedCpuIsaLimit limit(isa);
        SCOPED_TRACE(std::string(CpuIsaName(isa)) + ", width " + std::to_string(width) +
                     (forward_only ? ", forward only" : ", training"));
        const int height = 6, planes = 3;
        LayerParameter param = ParseLayerParam(
            "name: 'pool' type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }");
        PoolingLayer layer(param);
        layer.set_forward_only(forward_only);
        Blob bottom, top;
        bottom.Reshape({1, planes, height, width});
        float* x = bottom.mutable_cpu_data<float>();
        for (int i = 0; i < bottom.count(); ++i) x[i] = static_cast<float>((i * 7919) % 5) - 2;
        // One window of -inf and one of NaN in the first plane.
        for (int i : {0, 1, width, width + 1}) x[i] = -INFINITY;
        for (int i : {4, 5, width + 4, width + 5}) x[i] = NAN;
        layer.SetUp({&bottom}, {&top});
        layer.Forward({&bottom}, {&top});
        const int ph_n = top.shape(2), pw_n = top.shape(3);
        std::vector<float> want_diff(bottom.count(), 0.f);
        for (int plane = 0; plane < planes; ++plane)
          for (int ph = 0; ph < ph_n; ++ph)
            for (int pw = 0; pw < pw_n; ++pw) {
              float best = -FLT_MAX;
              int at = -1;
              for (int h = 2 * ph; h < std::min(2 * ph + 2, height); ++h)
                for (int w = 2 * pw; w < std::min(2 * pw + 2, width); ++w)
                  if (x[plane * height * width + h * width + w] > best) {
                    best = x[plane * height * width + h * width + w];
                    at = h * width + w;
                  }
              const int64_t o = (static_cast<int64_t>(plane) * ph_n + ph) * pw_n + pw;
              EXPECT_EQ(top.cpu_data<float>()[o], best) << plane << " " << ph << " " << pw;
              if (at >= 0) want_diff[plane * height * width + at] += static_cast<float>(o % 7 + 1);
            }
        if (forward_only) continue;
        float* dy = top.mutable_cpu_diff<float>();
        for (int64_t o = 0; o < top.count(); ++o) dy[o] = static_cast<float>(o % 7 + 1);
        layer.Backward({&top}, {true}, {&bottom});
        for (int i = 0; i < bottom.count(); ++i)
          EXPECT_EQ(bottom.cpu_diff<float>()[i], want_diff[i]) << "bottom " << i;
      }
}

// The ReLU fused into crema's MAX and AVE Backward (Layer::set_fused_relu_backward): overlapping
// windows (gradients add up first), padding, the mask as a second top, a global AVE.
TEST(PoolingValues, FusedReLUBackward) {
  const CpuEngine before = GetCpuEngine();
  SetCpuEngine(CpuEngine::kCaffe);
  const std::vector<std::vector<int>> shape = {{2, 3, 9, 8}};
  testing::ExpectFusedReLUBackward(
      "type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }", shape, 1, 0);
  testing::ExpectFusedReLUBackward(
      "type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }", shape, 2, 0);
  testing::ExpectFusedReLUBackward(
      "type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }", shape, 1, 0);
  testing::ExpectFusedReLUBackward(
      "type: 'Pooling' pooling_param { pool: AVE global_pooling: true }", shape, 1, 0);
  SetCpuEngine(before);
}

}  // namespace
}  // namespace crema
