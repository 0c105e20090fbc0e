// Eltwise SUM fusion (NetOptions::fuse_sum, net_fuse.cpp): in a CPU inference net with oneDNN,
// a residual Eltwise SUM is computed inside the convolution feeding its second bottom (oneDNN's
// sum post-op into the first bottom's memory, which the plan gives the Eltwise's top), with the
// same output bits as unfused, on ResNet-50 and on small nets; and only where that is legal.
#include <gtest/gtest.h>

#include <cstdlib>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "math/dnnl_engine.hpp"
#include "support/gradient_checker.hpp"
#include "support/net_checks.hpp"

namespace crema {
namespace {

std::unique_ptr<Net> Build(const NetParameter& param, bool fuse, bool blocked = true,
                           MemoryPlan plan = MemoryPlan::kInference) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TEST);
  options.verbose = false;
  options.memory_plan = plan;
  options.fold_batch_norm = plan == MemoryPlan::kInference;
  options.fuse_sum = fuse;
  options.channel_blocked = blocked;
  return std::make_unique<Net>(param, options);
}

std::vector<std::string> FusedSums(const Net& net) {
  return testing::LayerMapNames(net, net.sum_fused_into(), "<");
}

// A residual block with a projection shortcut and one with the identity (both fuse), then SUMs
// that do not: one whose convolution output passes a ReLU first, one whose convolution output is
// read by another layer too, one with a coefficient, and one whose convolution reads the
// shortcut's memory itself (it would overwrite its own input).
const char* kResidual = R"(
  layer { name: "data" type: "Input" top: "data"
          input_param { shape { dim: 2 dim: 16 dim: 9 dim: 11 } } }
  layer { name: "short" type: "Convolution" bottom: "data" top: "short"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "a" type: "Convolution" bottom: "data" top: "a"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
  layer { name: "a_relu" type: "ReLU" bottom: "a" top: "a" }
  layer { name: "b" type: "Convolution" bottom: "a" top: "b"
          convolution_param { num_output: 32 kernel_size: 1 bias_term: false } }
  layer { name: "b_bn" type: "BatchNorm" bottom: "b" top: "b"
          batch_norm_param { use_global_stats: true } }
  layer { name: "b_scale" type: "Scale" bottom: "b" top: "b" scale_param { bias_term: true } }
  layer { name: "sum1" type: "Eltwise" bottom: "short" bottom: "b" top: "sum1" }
  layer { name: "sum1_relu" type: "ReLU" bottom: "sum1" top: "sum1" }
  layer { name: "c1" type: "Convolution" bottom: "sum1" top: "c1"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
  layer { name: "c" type: "Convolution" bottom: "c1" top: "c"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "sum2" type: "Eltwise" bottom: "sum1" bottom: "c" top: "sum2" }
  layer { name: "d1" type: "Convolution" bottom: "sum2" top: "d1"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "d" type: "Convolution" bottom: "d1" top: "d"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "d_relu" type: "ReLU" bottom: "d" top: "d" }
  layer { name: "sum3" type: "Eltwise" bottom: "sum2" bottom: "d" top: "sum3" }
  layer { name: "e1" type: "Convolution" bottom: "sum3" top: "e1"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "e" type: "Convolution" bottom: "e1" top: "e"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "sum4" type: "Eltwise" bottom: "sum3" bottom: "e" top: "sum4" }
  layer { name: "other" type: "Eltwise" bottom: "e" bottom: "e" top: "other"
          eltwise_param { operation: PROD } }
  layer { name: "f1" type: "Convolution" bottom: "sum4" top: "f1"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "f" type: "Convolution" bottom: "f1" top: "f"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "sum5" type: "Eltwise" bottom: "sum4" bottom: "f" top: "sum5"
          eltwise_param { coeff: 1 coeff: 0.5 } }
  layer { name: "g" type: "Convolution" bottom: "sum5" top: "g"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
  layer { name: "sum6" type: "Eltwise" bottom: "sum5" bottom: "g" top: "sum6" }
)";

TEST(FuseSum, OnlyWhereTheConvolutionOutputFeedsTheSumAlone) {
  auto net = Build(testing::ParseNet(kResidual), true);
  if (!DnnlBuilt()) {
    EXPECT_TRUE(FusedSums(*net).empty());
    GTEST_SKIP() << "crema is built without oneDNN";
  }
  EXPECT_EQ(FusedSums(*net), (std::vector<std::string>{"sum1<b", "sum2<c"}));
  EXPECT_TRUE(FusedSums(*Build(testing::ParseNet(kResidual), false)).empty());
  // Not without an inference plan.
  EXPECT_TRUE(
      FusedSums(*Build(testing::ParseNet(kResidual), true, true, MemoryPlan::kOff)).empty());
  net->SetFuseSum(false);
  EXPECT_TRUE(FusedSums(*net).empty());
}

TEST(FuseSum, SameOutputsAsUnfused) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  for (bool blocked : {true, false}) {
    auto plain = Build(testing::ParseNet(kResidual), false, blocked);
    auto fused = Build(testing::ParseNet(kResidual), true, blocked);
    testing::ExpectSameOutputs(plain.get(), fused.get(), 2, 200);
  }
}

// With crema's kernels the convolution cannot add: the Eltwise runs, same outputs.
TEST(FuseSum, CremaKernelsRunTheEltwise) {
  ScopedCpuEngine caffe(CpuEngine::kCaffe);
  auto plain = Build(testing::ParseNet(kResidual), false);
  auto fused = Build(testing::ParseNet(kResidual), true);
  testing::ExpectSameOutputs(plain.get(), fused.get(), 1, 200);
}

TEST(FuseSum, ResNet50OutputsEqualUnfused) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/resnet50/deploy.prototxt",
                            &param);
  auto plain = Build(param, false);
  auto fused = Build(param, true);
  if (DnnlBuilt()) EXPECT_EQ(FusedSums(*fused).size(), 16u);  // every shortcut
  testing::ExpectSameOutputs(plain.get(), fused.get(), 1, 200);
}

}  // namespace
}  // namespace crema
