// Depthwise fusion (NetOptions::fuse_depthwise, net_fuse.cpp): in a CPU inference net with
// oneDNN on 16-channel blocks, a 3x3 depthwise convolution that alone reads a large 1x1
// convolution's output is computed by that convolution (math/pointwise_depthwise.hpp), with the
// same output bits as the two layers, on MobileNet v1 and on small nets; only where that is legal
// and, for a partial pass, only when both layers are in it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "layers/convolution/convolution_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "math/pointwise_depthwise.hpp"
#include "support/gradient_checker.hpp"
#include "support/net_checks.hpp"

namespace crema {
namespace {

std::unique_ptr<Net> Build(const NetParameter& param, bool fuse,
                           const std::vector<std::string>& keep = {}) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TEST);
  options.verbose = false;
  options.memory_plan = MemoryPlan::kInference;
  options.keep_blobs = keep;
  options.fold_batch_norm = true;
  options.fuse_depthwise = fuse;
  return std::make_unique<Net>(param, options);
}

std::vector<std::string> Fused(const Net& net) {
  return testing::LayerMapNames(net, net.depthwise_fused_into(), "<");
}

// The 1x1 convolutions whose last Forward computed their depthwise layer.
std::vector<std::string> RanFused(const Net& net) {
  std::vector<std::string> names;
  for (int l = 0; l < net.num_layers(); ++l)
    if (const int p = net.depthwise_fused_into()[l]; p >= 0)
      if (static_cast<const ConvolutionLayer*>(net.forward_layer(p))->fused_depthwise_ran())
        names.push_back(net.layer_names()[p]);
  return names;
}

bool Applies() { return ChannelBlock() == 16; }

// MobileNet's blocks at 112 x 112 (one image of each fusing 1x1 output more than 1 MB, over half
// of an L2 cache of up to 2 MB): a stride-2 pair with BatchNorm, Scale and ReLU folded or fused
// in, a stride-1 pair, a stride-2 pair with a leaky ReLU on the depthwise side (pw5, dw5); and
// pairs that do not fuse: the 1x1 output read by another layer too, a depthwise convolution with
// pad 0, one on a small plane.
const char* kBlocks = R"(
  layer { name: "data" type: "Input" top: "data"
          input_param { shape { dim: 1 dim: 3 dim: 112 dim: 112 } } }
  layer { name: "conv0" type: "Convolution" bottom: "data" top: "conv0"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
  layer { name: "relu0" type: "ReLU" bottom: "conv0" top: "conv0" }
  layer { name: "pw1" type: "Convolution" bottom: "conv0" top: "pw1"
          convolution_param { num_output: 64 kernel_size: 1 bias_term: false } }
  layer { name: "pw1_bn" type: "BatchNorm" bottom: "pw1" top: "pw1"
          batch_norm_param { use_global_stats: true } }
  layer { name: "pw1_scale" type: "Scale" bottom: "pw1" top: "pw1"
          scale_param { bias_term: true } }
  layer { name: "pw1_relu" type: "ReLU" bottom: "pw1" top: "pw1" }
  layer { name: "dw1" type: "Convolution" bottom: "pw1" top: "dw1"
          convolution_param { num_output: 64 group: 64 kernel_size: 3 pad: 1 stride: 2 } }
  layer { name: "dw1_relu" type: "ReLU" bottom: "dw1" top: "dw1" }
  layer { name: "pw2" type: "Convolution" bottom: "dw1" top: "pw2"
          convolution_param { num_output: 96 kernel_size: 1 } }
  layer { name: "pw2_relu" type: "ReLU" bottom: "pw2" top: "pw2" }
  layer { name: "dw2" type: "Convolution" bottom: "pw2" top: "dw2"
          convolution_param { num_output: 96 group: 96 kernel_size: 3 pad: 1 } }
  layer { name: "pw3" type: "Convolution" bottom: "dw2" top: "pw3"
          convolution_param { num_output: 96 kernel_size: 1 } }
  layer { name: "dw3" type: "Convolution" bottom: "pw3" top: "dw3"
          convolution_param { num_output: 96 group: 96 kernel_size: 3 pad: 1 stride: 2 } }
  layer { name: "also" type: "Pooling" bottom: "pw3" top: "also"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "pw4" type: "Convolution" bottom: "dw2" top: "pw4"
          convolution_param { num_output: 96 kernel_size: 1 } }
  layer { name: "dw4" type: "Convolution" bottom: "pw4" top: "dw4"
          convolution_param { num_output: 96 group: 96 kernel_size: 3 pad: 0 } }
  layer { name: "pw5" type: "Convolution" bottom: "dw4" top: "pw5"
          convolution_param { num_output: 112 kernel_size: 1 } }
  layer { name: "dw5" type: "Convolution" bottom: "pw5" top: "dw5"
          convolution_param { num_output: 112 group: 112 kernel_size: 3 pad: 1 stride: 2 } }
  layer { name: "dw5_relu" type: "ReLU" bottom: "dw5" top: "dw5"
          relu_param { negative_slope: 0.125 } }
  layer { name: "pw6" type: "Convolution" bottom: "dw5" top: "pw6"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "dw6" type: "Convolution" bottom: "pw6" top: "dw6"
          convolution_param { num_output: 32 group: 32 kernel_size: 3 pad: 1 stride: 2 } }
  layer { name: "pool" type: "Pooling" bottom: "dw6" top: "pool"
          pooling_param { pool: AVE global_pooling: true } }
  layer { name: "pool3" type: "Pooling" bottom: "dw3" top: "pool3"
          pooling_param { pool: AVE global_pooling: true } }
)";

TEST(FuseDepthwise, OnlyWhereTheOneByOneOutputFeedsTheDepthwiseLayerAlone) {
  auto net = Build(testing::ParseNet(kBlocks), true);
  if (!Applies()) {
    EXPECT_TRUE(Fused(*net).empty());
    GTEST_SKIP() << "no oneDNN with AVX-512 (16-channel blocks) here";
  }
  EXPECT_EQ(Fused(*net), (std::vector<std::string>{"dw1<pw1", "dw2<pw2", "dw5<pw5"}));
  // Not with dw5's input kept.
  EXPECT_EQ(Fused(*Build(testing::ParseNet(kBlocks), true, {"pw5"})),
            (std::vector<std::string>{"dw1<pw1", "dw2<pw2"}));
  EXPECT_TRUE(Fused(*Build(testing::ParseNet(kBlocks), false)).empty());
  net->SetFuseDepthwise(false);
  EXPECT_TRUE(Fused(*net).empty());
  net->SetFuseDepthwise(true);
  EXPECT_EQ(Fused(*net).size(), 3u);
  // Not without an inference plan.
  net->SetMemoryPlan(MemoryPlan::kOff, {});
  EXPECT_TRUE(Fused(*net).empty());
}

// The plan keeps a fused depthwise layer's top apart from its 1x1 convolution's input (they
// are in use at the same time), which unfused may share bytes.
TEST(FuseDepthwise, ThePlanKeepsTheTopApartFromTheInput) {
  if (!Applies()) GTEST_SKIP() << "no oneDNN with AVX-512 (16-channel blocks) here";
  auto net = Build(testing::ParseNet(kBlocks), true);
  for (const auto& [pw, dw] : {std::pair<std::string, std::string>{"pw1", "dw1"}, {"pw5", "dw5"}}) {
    const Blob& input = *net->blob_by_name(net->layer_by_name(pw)->layer_param().bottom(0));
    const Blob& top = *net->blob_by_name(dw);
    const auto* in = reinterpret_cast<const char*>(input.cpu_data<float>());
    const auto* out = reinterpret_cast<const char*>(top.cpu_data<float>());
    EXPECT_TRUE(in + input.count() * 4 <= out || out + top.count() * 4 <= in) << dw;
  }
}

TEST(FuseDepthwise, SameOutputsAsUnfused) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  auto plain = Build(testing::ParseNet(kBlocks), false);
  auto fused = Build(testing::ParseNet(kBlocks), true);
  for (int batch : {1, 3}) testing::ExpectSameOutputs(plain.get(), fused.get(), batch, 300);
  if (Applies()) EXPECT_EQ(RanFused(*fused), (std::vector<std::string>{"pw1", "pw2", "pw5"}));
}

// A pass that ends between the two layers writes the 1x1 convolution's output; the rest of the
// net then runs the depthwise layer on it.
TEST(FuseDepthwise, APassEndingBetweenTheLayersRunsThemApart) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  auto plain = Build(testing::ParseNet(kBlocks), false);
  auto fused = Build(testing::ParseNet(kBlocks), true);
  testing::RandomInferenceWeights(plain.get(), 7);
  fused->ShareTrainedLayersWith(*plain);
  const int dw1 = fused->layer_index("dw1");
  for (Net* net : {plain.get(), fused.get()}) {
    testing::FillUniform(net->input_blobs()[0], -1, 1, 5);
    net->ForwardFromTo(0, dw1 - 1);
    net->ForwardFromTo(dw1, net->num_layers() - 1);
  }
  EXPECT_TRUE(testing::SameBits(*plain->output_blobs()[0], *fused->output_blobs()[0], false));
  if (Applies()) EXPECT_EQ(RanFused(*fused), (std::vector<std::string>{"pw2", "pw5"}));
}

// An input reshaped without Net::Reshape, smaller and larger: the layers reshape as the pass
// reaches them, and the pass that meets the new shape runs the two apart (the skipped depthwise
// layer's top has the old shape, the plan is made again), the next fuses again; the outputs are
// the unfused ones throughout.
TEST(FuseDepthwise, AnInputReshapedInThePassRunsThemApartOnce) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  auto plain = Build(testing::ParseNet(kBlocks), false);
  auto fused = Build(testing::ParseNet(kBlocks), true);
  testing::RandomInferenceWeights(plain.get(), 13);
  fused->ShareTrainedLayersWith(*plain);
  for (const std::vector<int>& shape :
       {std::vector<int>{1, 3, 112, 112}, {1, 3, 112, 104}, {2, 3, 120, 116}}) {
    for (int pass = 0; pass < 2; ++pass) {
      for (Net* net : {plain.get(), fused.get()}) {
        net->input_blobs()[0]->Reshape(shape);
        testing::FillUniform(net->input_blobs()[0], -1, 1, 17 + pass);
        net->Forward();
      }
      for (size_t i = 0; i < fused->output_blobs().size(); ++i)
        EXPECT_TRUE(testing::SameBits(*plain->output_blobs()[i], *fused->output_blobs()[i], false))
            << "output " << i << ", width " << shape[3] << ", pass " << pass;
      if (Applies() && shape[3] != 112)
        EXPECT_EQ(RanFused(*fused).size(), pass == 0 ? 0u : 3u)
            << "width " << shape[3] << ", pass " << pass;
    }
  }
}

// Under the automatic engine choice a pair fuses once both layers' races are decided (oneDNN's
// kernel alone on blocked inputs). The same net unfused afterwards (the same decisions: two nets
// may race other layers to other kernels) gives the same bits.
TEST(FuseDepthwise, AutomaticEnginesFuseOnceDecided) {
  ScopedCpuEngine automatic(CpuEngine::kAuto);
  auto net = Build(testing::ParseNet(kBlocks), true);
  testing::RandomInferenceWeights(net.get(), 11);
  net->PrepareCpuEngines();
  testing::FillUniform(net->input_blobs()[0], -1, 1, 3);
  net->Forward();
  if (Applies()) EXPECT_EQ(RanFused(*net), (std::vector<std::string>{"pw1", "pw2", "pw5"}));
  std::vector<Blob> fused(net->output_blobs().size());
  for (size_t i = 0; i < fused.size(); ++i) fused[i].CopyFrom(*net->output_blobs()[i], false, true);
  net->SetFuseDepthwise(false);
  net->Forward();
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(testing::SameBits(fused[i], *net->output_blobs()[i], false)) << "output " << i;
}

TEST(FuseDepthwise, MobileNetsOutputsEqualUnfused) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  const std::vector<std::pair<std::string, std::vector<std::string>>> nets = {
      {"mobilenet_v1",
       {"conv2_2/dw<conv2_1/sep", "conv3_1/dw<conv2_2/sep", "conv3_2/dw<conv3_1/sep"}},
      {"mobilenet_v2", {"conv2_1/dwise<conv2_1/expand", "conv2_2/dwise<conv2_2/expand"}}};
  for (const auto& [name, pairs] : nets) {
    SCOPED_TRACE(name);
    NetParameter param;
    ReadNetParamsFromTextFile(
        std::string(CREMA_SOURCE_DIR) + "/models/" + name + "/deploy.prototxt", &param);
    auto plain = Build(param, false);
    auto fused = Build(param, true);
    if (Applies()) EXPECT_EQ(Fused(*fused), pairs);
    testing::ExpectSameOutputs(plain.get(), fused.get(), 1, 300);
    if (Applies()) EXPECT_EQ(RanFused(*fused).size(), pairs.size());
  }
}

}  // namespace
}  // namespace crema
