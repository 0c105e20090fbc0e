// The oneDNN engine of Pooling (dnnl_pooling.hpp) against crema's own kernels (policy caffe):
// MAX and AVE over pads, strides, Caffe's ceil with a clipped last window, global pooling, ties;
// the geometries where oneDNN's function differs from Caffe's stay on crema's kernels. Skipped
// when crema is built without oneDNN.
#include "layers/pooling/dnnl_pooling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "layers/pooling/pooling_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "support/gradient_checker.hpp"

namespace crema {
namespace {

using testing::FillGaussian;
using testing::ParseLayerParam;

struct PoolCase {
  const char* name;
  std::string param;  // the body of pooling_param
  std::vector<int> shape;
  bool dnnl;  // whether oneDNN takes it
};

std::ostream& operator<<(std::ostream& out, const PoolCase& c) { return out << c.name; }

struct PoolResult {
  std::vector<float> top, bottom_diff;
  std::vector<std::string> engines;  // forward, backward per pass
};

// Two forward + backward passes under `policy`; `ties` rounds the input to multiples of 0.5 so
// that windows hold equal maxima.
PoolResult RunPool(const PoolCase& c, CpuEngine policy, bool ties) {
  const CpuEngine saved = GetCpuEngine();
  SetCpuEngine(policy);
  SetRandomSeed(1701);  // STOCHASTIC samples the same cells under every policy
  PoolingLayer layer(
      ParseLayerParam("name: 'pool' type: 'Pooling' pooling_param { " + c.param + " }"));
  Blob bottom(c.shape), top;
  FillGaussian(&bottom, 0, 1, 3);
  if (ties) {
    float* data = bottom.mutable_cpu_data<float>();
    for (int64_t i = 0; i < bottom.count(); ++i) data[i] = std::round(data[i] * 2) / 2;
  }
  layer.SetUp({&bottom}, {&top});
  PoolResult result;
  for (int pass = 0; pass < 2; ++pass) {
    layer.Forward({&bottom}, {&top});
    result.engines.push_back(layer.cpu_engine());
    result.top.assign(top.cpu_data<float>(), top.cpu_data<float>() + top.count());
    FillGaussian(&top, 0, 1, 5 + pass);  // into the data, then moved to the diff
    std::memcpy(top.mutable_cpu_diff<float>(), top.cpu_data<float>(), top.count() * sizeof(float));
    layer.Backward({&top}, {true}, {&bottom});
    result.engines.push_back(layer.cpu_engine());
  }
  result.bottom_diff.assign(bottom.cpu_diff<float>(), bottom.cpu_diff<float>() + bottom.count());
  SetCpuEngine(saved);
  return result;
}

class DnnlPoolingTest : public ::testing::TestWithParam<PoolCase> {
 protected:
  void SetUp() override {
    if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  }
};

TEST_P(DnnlPoolingTest, MatchesCremaKernels) {
  const PoolCase& c = GetParam();
  for (bool ties : {false, true}) {
    const PoolResult crema = RunPool(c, CpuEngine::kCaffe, ties);
    const PoolResult dnnl = RunPool(c, CpuEngine::kDnnl, ties);
    for (const std::string& engine : dnnl.engines)
      EXPECT_EQ(engine, c.dnnl ? "oneDNN" : "crema") << (ties ? "ties" : "");
    ASSERT_EQ(dnnl.top.size(), crema.top.size());
    for (size_t i = 0; i < crema.top.size(); ++i)
      ASSERT_NEAR(dnnl.top[i], crema.top[i], 1e-5 * (1 + std::fabs(crema.top[i])))
          << "top element " << i << (ties ? " (ties)" : "");
    // MAX: the gradient goes to the same (first) maximum; AVE: the same shares.
    for (size_t i = 0; i < crema.bottom_diff.size(); ++i)
      ASSERT_NEAR(dnnl.bottom_diff[i], crema.bottom_diff[i],
                  1e-5 * (1 + std::fabs(crema.bottom_diff[i])))
          << "bottom diff element " << i << (ties ? " (ties)" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, DnnlPoolingTest,
    ::testing::Values(
        PoolCase{"max_2x2", "pool: MAX kernel_size: 2 stride: 2", {2, 3, 8, 8}, true},
        PoolCase{"max_3x3_s2_ceil", "pool: MAX kernel_size: 3 stride: 2", {2, 4, 7, 6}, true},
        PoolCase{"max_3x3_s2_pad", "pool: MAX kernel_size: 3 stride: 2 pad: 1", {2, 3, 6, 7}, true},
        PoolCase{"max_rect",
                 "pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1",
                 {1, 2, 9, 5},
                 true},
        PoolCase{"max_stride_gt_kernel", "pool: MAX kernel_size: 2 stride: 3", {2, 2, 7, 7}, true},
        PoolCase{"max_floor",
                 "pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR",
                 {2, 3, 8, 8},
                 true},
        PoolCase{"max_global", "pool: MAX global_pooling: true", {2, 5, 4, 3}, true},
        PoolCase{"ave_2x2", "pool: AVE kernel_size: 2 stride: 2", {2, 3, 8, 8}, true},
        PoolCase{"ave_3x3_s2_ceil", "pool: AVE kernel_size: 3 stride: 2", {2, 4, 6, 7}, true},
        PoolCase{"ave_pad_inside", "pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 3, 7, 7}, true},
        PoolCase{"ave_global", "pool: AVE global_pooling: true", {2, 5, 7, 6}, true},
        // The last window reaches beyond the padding: Caffe divides by less than the kernel.
        PoolCase{
            "ave_pad_overhang", "pool: AVE kernel_size: 3 stride: 2 pad: 1", {2, 3, 6, 6}, false},
        // The last window of Caffe's ceil lies wholly outside the input.
        PoolCase{"max_empty_window", "pool: MAX kernel_size: 1 stride: 3", {1, 2, 8, 8}, false},
        PoolCase{"stochastic", "pool: STOCHASTIC kernel_size: 2 stride: 2", {1, 2, 4, 4}, false}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

// The argmax mask top keeps crema's kernels; `engine: CAFFE` (Caffe's cuDNN choice) does not.
TEST(DnnlPoolingFallback, MaskTopKeepsCremaKernels) {
  if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  const CpuEngine saved = GetCpuEngine();
  SetCpuEngine(CpuEngine::kDnnl);
  for (const char* text :
       {"name: 'p' type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }",
        "name: 'p' type: 'Pooling' pooling_param { pool: AVE kernel_size: 2 engine: CAFFE }"}) {
    PoolingLayer layer(ParseLayerParam(text));
    Blob bottom(std::vector<int>{1, 2, 4, 4}), top, mask;
    FillGaussian(&bottom, 0, 1);
    const bool with_mask = std::string(text).find("MAX") != std::string::npos;
    BlobVec tops = with_mask ? BlobVec{&top, &mask} : BlobVec{&top};
    layer.SetUp({&bottom}, tops);
    layer.Forward({&bottom}, tops);
    EXPECT_STREQ(layer.cpu_engine(), with_mask ? "crema" : "oneDNN") << text;
  }
  SetCpuEngine(saved);
}

}  // namespace
}  // namespace crema
