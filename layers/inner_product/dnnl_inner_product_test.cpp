// The oneDNN engine of InnerProduct (dnnl_inner_product.hpp) against crema's GEMMs (policy
// caffe): forward, bottom diff and accumulated weight and bias diffs, transpose, no bias, axis,
// propagate_down. Skipped when crema is built without oneDNN.
#include "layers/inner_product/dnnl_inner_product.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "layers/inner_product/inner_product_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "support/gradient_checker.hpp"

namespace crema {
namespace {

using testing::FillGaussian;
using testing::ParseLayerParam;

struct IpCase {
  const char* name;
  std::string param;  // the body of inner_product_param
  std::vector<int> shape;
};

std::ostream& operator<<(std::ostream& out, const IpCase& c) { return out << c.name; }

struct IpResult {
  std::vector<std::vector<float>> values;  // top, bottom diff, weight diff, bias diff
  std::vector<std::string> engines;
};

// Two forward + backward passes under `policy`; param diffs start at 1 and accumulate; the
// bottom diff starts at 42 (kept when !propagate_down).
IpResult RunIp(const IpCase& c, CpuEngine policy, bool propagate_down = true) {
  const CpuEngine saved = GetCpuEngine();
  SetCpuEngine(policy);
  SetRandomSeed(1701);
  InnerProductLayer layer(ParseLayerParam(
      "name: 'ip' type: 'InnerProduct' inner_product_param { " + c.param +
      " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }"));
  Blob bottom(c.shape), top;
  FillGaussian(&bottom, 0, 1, 3);
  layer.SetUp({&bottom}, {&top});
  for (const BlobPtr& blob : layer.blobs())
    std::fill(blob->mutable_cpu_diff<float>(), blob->mutable_cpu_diff<float>() + blob->count(),
              1.0f);
  std::fill(bottom.mutable_cpu_diff<float>(), bottom.mutable_cpu_diff<float>() + bottom.count(),
            42.0f);
  IpResult result;
  std::vector<float> top_data;
  for (int pass = 0; pass < 2; ++pass) {
    layer.Forward({&bottom}, {&top});
    result.engines.push_back(layer.cpu_engine());
    top_data.assign(top.cpu_data<float>(), top.cpu_data<float>() + top.count());
    FillGaussian(&top, 0, 1, 7 + pass);  // into the data, then moved to the diff
    std::memcpy(top.mutable_cpu_diff<float>(), top.cpu_data<float>(), top.count() * sizeof(float));
    layer.Backward({&top}, {propagate_down}, {&bottom});
    result.engines.push_back(layer.cpu_engine());
  }
  result.values.push_back(top_data);
  result.values.emplace_back(bottom.cpu_diff<float>(), bottom.cpu_diff<float>() + bottom.count());
  for (const BlobPtr& blob : layer.blobs())
    result.values.emplace_back(blob->cpu_diff<float>(), blob->cpu_diff<float>() + blob->count());
  SetCpuEngine(saved);
  return result;
}

class DnnlInnerProductTest : public ::testing::TestWithParam<IpCase> {
 protected:
  void SetUp() override {
    if (!DnnlBuilt()) GTEST_SKIP() << "crema is built without oneDNN";
  }
};

TEST_P(DnnlInnerProductTest, MatchesCremaKernels) {
  const IpCase& c = GetParam();
  for (bool propagate_down : {true, false}) {
    const IpResult crema = RunIp(c, CpuEngine::kCaffe, propagate_down);
    const IpResult dnnl = RunIp(c, CpuEngine::kDnnl, propagate_down);
    for (const std::string& engine : dnnl.engines) EXPECT_EQ(engine, "oneDNN");
    ASSERT_EQ(dnnl.values.size(), crema.values.size());
    const char* names[] = {"top", "bottom diff", "weight diff", "bias diff"};
    for (size_t v = 0; v < crema.values.size(); ++v) {
      const std::vector<float>& expected = crema.values[v];
      ASSERT_EQ(dnnl.values[v].size(), expected.size());
      double scale = 0;
      for (float x : expected) scale = std::max(scale, static_cast<double>(std::fabs(x)));
      for (size_t i = 0; i < expected.size(); ++i)
        ASSERT_NEAR(dnnl.values[v][i], expected[i], 1e-4 * (scale + std::fabs(expected[i])))
            << names[v] << " element " << i << (propagate_down ? "" : " (no propagate_down)");
    }
    if (!propagate_down) {
      for (float x : dnnl.values[1]) ASSERT_EQ(x, 42.0f);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, DnnlInnerProductTest,
    ::testing::Values(IpCase{"basic", "num_output: 10", {4, 3, 5, 5}},
                      IpCase{"batch1", "num_output: 7", {1, 33}},
                      IpCase{"transpose", "num_output: 6 transpose: true", {5, 2, 3, 4}},
                      IpCase{"no_bias", "num_output: 9 bias_term: false", {3, 17}},
                      IpCase{"axis2", "num_output: 4 axis: 2", {2, 3, 5, 6}},
                      IpCase{"wide", "num_output: 64 transpose: true bias_term: false", {16, 100}}),
    [](const ::testing::TestParamInfo<IpCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace crema
