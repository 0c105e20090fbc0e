// Fusing in-place ReLUs into their producers (NetOptions::fuse_relu): every blob of a fused net
// holds the same bits as in the unfused net after Forward (every zoo deploy net; partial
// ForwardFromTo ranges) and after Backward (data, gradients, parameter gradients), and only the
// ReLUs the rule allows are fused; the same for ReLUs whose gradient their reader computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>

#include "core/cuda_context.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "math/dnnl_engine.hpp"
#include "support/net_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

// Values in [-1, 1] with about a quarter of them exact zeros or negative zeros, so the ReLU's
// treatment of signed zeros is compared too.
void FillRandom(Blob* blob, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) {
    const unsigned r = rng() % 8;
    x[i] = r == 0 ? 0.0f : r == 1 ? -0.0f : uniform(rng);
  }
}

void RandomWeights(Net* net, unsigned seed) {
  for (size_t j = 0; j < net->learnable_params().size(); ++j)
    FillRandom(net->learnable_params()[j], seed + static_cast<unsigned>(j));
  // BatchNorm's moving-average factor: 1, so its statistics are used as they are.
  for (const auto& layer : net->layers())
    if (std::string(layer->type()) == "BatchNorm") {
      layer->blobs()[1]->scale_data(0);  // variances: 0 + eps
      layer->blobs()[2]->mutable_cpu_data<float>()[0] = 1.0f;
    }
}

std::unique_ptr<Net> Build(const NetParameter& param, Phase phase, bool fuse, bool fold_bn = false,
                           const Device& device = Device::Cpu()) {
  NetOptions options;
  options.device = device;
  options.override_state = true;
  options.state.set_phase(phase);
  options.verbose = false;
  options.fuse_relu = fuse;
  options.fold_batch_norm = fold_bn;
  return std::make_unique<Net>(param, options);
}

std::vector<std::string> Fused(const Net& net) {
  return testing::LayerMapNames(net, net.relu_fused_into(), ">");
}

// Every blob (data, and diffs when `diffs`) and every parameter gradient (when `diffs`).
void ExpectSameBlobs(const Net& plain, const Net& fused, bool diffs, const std::string& what) {
  testing::ExpectSameBlobs(plain, fused, diffs, false, what);
}

void FillInputs(Net* net, unsigned seed) {
  for (size_t i = 0; i < net->input_blobs().size(); ++i)
    FillRandom(net->input_blobs()[i], seed + static_cast<unsigned>(i));
}

class ZooDeploy : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooDeploy, FusedForwardGivesIdenticalBlobs) {
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + GetParam(), &param);
  auto plain = Build(param, TEST, false);
  auto fused = Build(param, TEST, true);
  EXPECT_TRUE(Fused(*plain).empty());
  // In these nets every in-place ReLU right after a layer that can fuse it is fused.
  int fusable = 0;
  for (int l = 1; l < plain->num_layers(); ++l)
    fusable += std::string(plain->layers()[l]->type()) == "ReLU" &&
               plain->layers()[l - 1]->SupportsFusedReLU() &&
               plain->top_vecs()[l][0] == plain->bottom_vecs()[l][0];
  EXPECT_GT(fusable, 0);
  EXPECT_EQ(static_cast<int>(Fused(*fused).size()), fusable);
  RandomWeights(plain.get(), 3);
  fused->ShareTrainedLayersWith(*plain);
  for (Net* net : {plain.get(), fused.get()}) {
    for (Blob* input : net->input_blobs()) {
      std::vector<int> shape = input->shape();
      shape[0] = 1;  // batch 1 keeps the big nets quick
      input->Reshape(shape);
    }
    net->Reshape();
    FillInputs(net, 17);
    net->Forward();
  }
  ExpectSameBlobs(*plain, *fused, false, GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Models, ZooDeploy,
    ::testing::Values("lenet/lenet.prototxt", "cifar10_quick/deploy.prototxt",
                      "bvlc_reference_caffenet/deploy.prototxt", "bvlc_googlenet/deploy.prototxt",
                      "squeezenet_v1.1/deploy.prototxt", "mobilenet_v1/deploy.prototxt",
                      "mobilenet_v2/deploy.prototxt", "resnet50/deploy.prototxt"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param.substr(0, info.param.find('/'));
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// Producers of every kind and path: batched im2col, 1x1 and depthwise convolutions with and
// without bias, InnerProduct, Eltwise SUM (coefficients 1 with two and three bottoms, other
// coefficients), PROD and MAX, Scale with a bias indexed like the scale and one that is not
// (a two-bottom Scale); leaky slopes.
const char* kProducers = R"(
  name: "producers"
  layer { name: "data" type: "Input" top: "data" top: "label" top: "coef"
          input_param { shape { dim: 2 dim: 4 dim: 7 dim: 6 } shape { dim: 2 }
                        shape { dim: 2 dim: 6 } } }
  layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
          convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }
  layer { name: "conv_relu" type: "ReLU" bottom: "conv" top: "conv" }
  layer { name: "c1x1" type: "Convolution" bottom: "conv" top: "c1x1"
          convolution_param { num_output: 6 kernel_size: 1 bias_term: false } }
  layer { name: "c1x1_relu" type: "ReLU" bottom: "c1x1" top: "c1x1"
          relu_param { negative_slope: 0.1 } }
  layer { name: "dw" type: "Convolution" bottom: "c1x1" top: "dw"
          convolution_param { num_output: 6 group: 6 kernel_size: 3 pad: 1 } }
  layer { name: "dw_relu" type: "ReLU" bottom: "dw" top: "dw" }
  layer { name: "sum2" type: "Eltwise" bottom: "dw" bottom: "conv" top: "sum2" }
  layer { name: "sum2_relu" type: "ReLU" bottom: "sum2" top: "sum2" }
  layer { name: "sum3" type: "Eltwise" bottom: "sum2" bottom: "dw" bottom: "c1x1" top: "sum3" }
  layer { name: "sum3_relu" type: "ReLU" bottom: "sum3" top: "sum3"
          relu_param { negative_slope: 0.25 } }
  layer { name: "wsum" type: "Eltwise" bottom: "sum3" bottom: "conv" top: "wsum"
          eltwise_param { coeff: 0.5 coeff: -1.5 } }
  layer { name: "wsum_relu" type: "ReLU" bottom: "wsum" top: "wsum" }
  layer { name: "prod" type: "Eltwise" bottom: "wsum" bottom: "sum2" top: "prod"
          eltwise_param { operation: PROD } }
  layer { name: "prod_relu" type: "ReLU" bottom: "prod" top: "prod" }
  layer { name: "max" type: "Eltwise" bottom: "prod" bottom: "dw" top: "max"
          eltwise_param { operation: MAX } }
  layer { name: "max_relu" type: "ReLU" bottom: "max" top: "max" }
  layer { name: "scale" type: "Scale" bottom: "max" top: "scale"
          scale_param { bias_term: true } }
  layer { name: "scale_relu" type: "ReLU" bottom: "scale" top: "scale" }
  layer { name: "scale2" type: "Scale" bottom: "scale" top: "scale" }
  layer { name: "scale2_relu" type: "ReLU" bottom: "scale" top: "scale"
          relu_param { negative_slope: 0.5 } }
  layer { name: "bscale" type: "Scale" bottom: "scale" bottom: "coef" top: "bscale"
          scale_param { axis: 0 num_axes: 1 bias_term: true } }
  layer { name: "bscale_relu" type: "ReLU" bottom: "bscale" top: "bscale" }
  layer { name: "ip" type: "InnerProduct" bottom: "bscale" top: "ip"
          inner_product_param { num_output: 5 } }
  layer { name: "ip_relu" type: "ReLU" bottom: "ip" top: "ip" }
  layer { name: "ip2" type: "InnerProduct" bottom: "ip" top: "ip2"
          inner_product_param { num_output: 3 } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";

void ExpectEveryProducerIdentical(const Device& device = Device::Cpu()) {
  const NetParameter param = testing::ParseNet(kProducers);
  auto plain = Build(param, TRAIN, false, false, device);
  auto fused = Build(param, TRAIN, true, false, device);
  EXPECT_EQ(Fused(*fused),
            (std::vector<std::string>{"conv_relu>conv", "c1x1_relu>c1x1", "dw_relu>dw",
                                      "sum2_relu>sum2", "sum3_relu>sum3", "wsum_relu>wsum",
                                      "prod_relu>prod", "max_relu>max", "scale_relu>scale",
                                      "scale2_relu>scale2", "bscale_relu>bscale", "ip_relu>ip"}));
  RandomWeights(plain.get(), 5);
  fused->ShareTrainedLayersWith(*plain);
  for (int pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain.get(), fused.get()}) {
      FillInputs(net, 100 + pass);
      float* label = net->input_blobs()[1]->mutable_cpu_data<float>();
      label[0] = 1, label[1] = 2;
      net->ClearParamDiffs();
      net->Forward();
      net->Backward();
    }
    ExpectSameBlobs(*plain, *fused, true, "pass " + std::to_string(pass));
  }
}

TEST(FuseReLU, EveryProducerGivesIdenticalForwardAndBackward) { ExpectEveryProducerIdentical(); }

// The GPU kernels apply a fused ReLU with the ReLU layer's expression too (deterministic cuDNN
// algorithms, so that both nets run the same ones).
TEST(FuseReLU, EveryProducerGivesIdenticalForwardAndBackwardOnGpu) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const bool before = gpu::Deterministic();
  gpu::SetDeterministic(true);
  ExpectEveryProducerIdentical(Device::Cuda(0));
  gpu::SetDeterministic(before);
}

// The oneDNN convolutions apply a fused ReLU inside the convolution (a post-op giving crema's
// values, signed zeros included), inner products after oneDNN's result. Without oneDNN in the build
// this runs crema's kernels again.
TEST(FuseReLU, EveryProducerGivesIdenticalResultsOnOneDnn) {
  const CpuEngine before = GetCpuEngine();
  SetCpuEngine(CpuEngine::kDnnl);
  ExpectEveryProducerIdentical();
  SetCpuEngine(before);
}

// A ReLU fused into a convolution whose BatchNorm and Scale are folded (in place, ResNet's way).
TEST(FuseReLU, FusesIntoAFoldedConvolution) {
  const NetParameter param = testing::ParseNet(R"(
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
            batch_norm_param { use_global_stats: true } }
    layer { name: "scale" type: "Scale" bottom: "conv" top: "conv"
            scale_param { bias_term: true } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
  )");
  auto plain = Build(param, TEST, false, true);
  auto fused = Build(param, TEST, true, true);
  EXPECT_EQ(Fused(*fused), std::vector<std::string>{"relu>conv"});
  RandomWeights(plain.get(), 9);
  fused->ShareTrainedLayersWith(*plain);
  for (Net* net : {plain.get(), fused.get()}) {
    FillInputs(net, 4);
    net->Forward();
  }
  ExpectSameBlobs(*plain, *fused, false, "folded");
  // Unfolding plans the fusion again, into the Scale.
  fused->SetFoldBatchNorm(false);
  EXPECT_EQ(Fused(*fused), std::vector<std::string>{"relu>scale"});
  fused->SetFuseReLU(false);
  EXPECT_TRUE(Fused(*fused).empty());
}

const char* kPartial = R"(
  layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 8 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          inner_product_param { num_output: 6 } }
  layer { name: "relu" type: "ReLU" bottom: "ip" top: "ip"
          relu_param { negative_slope: 0.5 } }
  layer { name: "ip2" type: "InnerProduct" bottom: "ip" top: "ip2"
          inner_product_param { num_output: 2 } }
)";

// A range that stops at the producer leaves the value before the ReLU (as unfused); a range that
// starts at the ReLU applies it (the producer ran in an earlier call).
TEST(FuseReLU, PartialRangesSeeTheSameValues) {
  const NetParameter param = testing::ParseNet(kPartial);
  auto plain = Build(param, TEST, false);
  auto fused = Build(param, TEST, true);
  ASSERT_EQ(Fused(*fused), std::vector<std::string>{"relu>ip"});
  RandomWeights(plain.get(), 1);
  fused->ShareTrainedLayersWith(*plain);
  for (Net* net : {plain.get(), fused.get()}) {
    FillInputs(net, 2);
    net->ForwardTo(1);
  }
  ExpectSameBlobs(*plain, *fused, false, "ForwardTo(ip)");
  int negative = 0;
  for (int64_t i = 0; i < fused->blob_by_name("ip")->count(); ++i)
    negative += fused->blob_by_name("ip")->data_at(i) < 0;
  EXPECT_GT(negative, 0);  // the ReLU has not run yet (its slope would halve them)
  for (Net* net : {plain.get(), fused.get()}) net->ForwardFrom(2);
  ExpectSameBlobs(*plain, *fused, false, "ForwardFrom(relu)");
  for (Net* net : {plain.get(), fused.get()}) net->Forward();
  ExpectSameBlobs(*plain, *fused, false, "Forward");
}

// What is not fused: a ReLU with a top of its own, a ReLU after a Split (its value has other
// readers), a producer with two tops, and a producer that cannot fuse (Power).
TEST(FuseReLU, OnlyWhatTheRuleAllows) {
  const NetParameter param = testing::ParseNet(R"(
    layer { name: "data" type: "Input" top: "data" top: "img"
            input_param { shape { dim: 2 dim: 4 } shape { dim: 1 dim: 2 dim: 3 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
            inner_product_param { num_output: 4 } }
    layer { name: "own_top" type: "ReLU" bottom: "ip" top: "r" }
    layer { name: "ip2" type: "InnerProduct" bottom: "r" top: "ip2"
            inner_product_param { num_output: 4 } }
    layer { name: "split" type: "Split" bottom: "ip2" top: "s1" top: "s2" }
    layer { name: "after_split" type: "ReLU" bottom: "s1" top: "s1" }
    layer { name: "power" type: "Power" bottom: "s1" top: "p" }
    layer { name: "after_power" type: "ReLU" bottom: "p" top: "p" }
    layer { name: "ip4" type: "InnerProduct" bottom: "s2" top: "ip4"
            inner_product_param { num_output: 4 } }
    layer { name: "fused" type: "ReLU" bottom: "ip4" top: "ip4" }
    layer { name: "two_tops" type: "Convolution" bottom: "img" bottom: "img" top: "c1" top: "c2"
            convolution_param { num_output: 2 kernel_size: 1 } }
    layer { name: "after_two_tops" type: "ReLU" bottom: "c1" top: "c1" }
  )");
  auto net = Build(param, TRAIN, true);
  EXPECT_EQ(Fused(*net), std::vector<std::string>{"fused>ip4"});
}

std::vector<std::string> BackwardFused(const Net& net) {
  return testing::LayerMapNames(net, net.relu_backward_fused_into(), ">");
}

// Readers computing a ReLU's gradient: a Concat (two ReLUs with different slopes, one of them
// also fused forward), a Split of three tops, MAX pooling (3x3 windows at stride 2 overlap, so
// gradients add up before the ReLU's), MAX pooling with its mask as a second top, and AVE
// pooling; not fused: a ReLU whose reader is a convolution or runs in place after it.
const char* kReaders = R"(
  name: "readers"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } shape { dim: 2 } } }
  layer { name: "a" type: "Convolution" bottom: "data" top: "a"
          convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
  layer { name: "a_relu" type: "ReLU" bottom: "a" top: "a" }
  layer { name: "b" type: "Power" bottom: "data" top: "b" power_param { scale: 2 shift: -0.5 } }
  layer { name: "b_relu" type: "ReLU" bottom: "b" top: "b" relu_param { negative_slope: 0.1 } }
  layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" }
  layer { name: "cat_relu" type: "ReLU" bottom: "cat" top: "cat" }
  layer { name: "s1" type: "Convolution" bottom: "cat" top: "s1"
          convolution_param { num_output: 5 kernel_size: 1 } }
  layer { name: "s2" type: "Convolution" bottom: "cat" top: "s2"
          convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
  layer { name: "s3" type: "Pooling" bottom: "cat" top: "s3"
          pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
  layer { name: "sum" type: "Eltwise" bottom: "s1" bottom: "s2" top: "sum" }
  layer { name: "sum_relu" type: "ReLU" bottom: "sum" top: "sum" }
  layer { name: "maxpool" type: "Pooling" bottom: "sum" top: "maxpool"
          pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
  layer { name: "s3_relu" type: "ReLU" bottom: "s3" top: "s3"
          relu_param { negative_slope: 0.2 } }
  layer { name: "avepool" type: "Pooling" bottom: "s3" top: "avepool"
          pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 } }
  layer { name: "mp_relu" type: "ReLU" bottom: "maxpool" top: "maxpool" }
  layer { name: "masked" type: "Pooling" bottom: "maxpool" top: "masked" top: "mask"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "ap_relu" type: "ReLU" bottom: "avepool" top: "avepool" }
  layer { name: "in_place" type: "Power" bottom: "avepool" top: "avepool"
          power_param { scale: 1.5 } }
  layer { name: "c" type: "Convolution" bottom: "avepool" top: "c"
          convolution_param { num_output: 2 kernel_size: 3 } }
  layer { name: "c_relu" type: "ReLU" bottom: "c" top: "c" }
  layer { name: "ip_c" type: "InnerProduct" bottom: "c" top: "ip_c"
          inner_product_param { num_output: 3 } }
  layer { name: "ip_m" type: "InnerProduct" bottom: "masked" top: "ip_m"
          inner_product_param { num_output: 3 } }
  layer { name: "ip" type: "Eltwise" bottom: "ip_c" bottom: "ip_m" top: "ip" }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

// Forward and Backward of a plain and a fused net (the same weights and inputs); every blob and
// gradient compared. `range`: Backward as BackwardFromTo(num_layers - 1, range) then the rest.
// `plan`: both nets' activation memory under the training plan (buffers shared as the solver
// runs it).
void ExpectReadersIdentical(const NetParameter& param, int range = 0, bool plan = false) {
  auto plain = Build(param, TRAIN, false);
  auto fused = Build(param, TRAIN, true);
  if (plan)
    for (Net* net : {plain.get(), fused.get()}) net->SetMemoryPlan(MemoryPlan::kTraining, {});
  RandomWeights(plain.get(), 11);
  fused->ShareTrainedLayersWith(*plain);
  for (int pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain.get(), fused.get()}) {
      FillInputs(net, 200 + pass);
      float* label = net->input_blobs()[1]->mutable_cpu_data<float>();
      label[0] = 0, label[1] = 2;
      net->ClearParamDiffs();
      net->Forward();
      if (range > 0) {
        net->BackwardFromTo(net->num_layers() - 1, range);
        net->BackwardFromTo(range - 1, 0);
      } else {
        net->Backward();
      }
    }
    ExpectSameBlobs(*plain, *fused, true, "pass " + std::to_string(pass));
  }
}

TEST(FuseReLU, ReadersComputeTheReLUsGradient) {
  const NetParameter param = testing::ParseNet(kReaders);
  auto fused = Build(param, TRAIN, true);
  EXPECT_EQ(BackwardFused(*fused),
            (std::vector<std::string>{"a_relu>cat", "b_relu>cat", "cat_relu>cat_cat_relu_0_split",
                                      "sum_relu>maxpool", "s3_relu>avepool", "mp_relu>masked"}));
  EXPECT_TRUE(BackwardFused(*Build(param, TRAIN, false)).empty());
  ExpectReadersIdentical(param);
  ExpectReadersIdentical(param, 0, true);
}

// oneDNN's pooling does not take the ReLU (the ReLU's Backward runs); without oneDNN in the build
// this runs crema's kernels again.
TEST(FuseReLU, ReadersComputeTheReLUsGradientOnOneDnn) {
  const CpuEngine before = GetCpuEngine();
  SetCpuEngine(CpuEngine::kDnnl);
  ExpectReadersIdentical(testing::ParseNet(kReaders));
  SetCpuEngine(before);
}

// A Backward range that stops between a reader and its ReLU leaves the ReLU to the next range.
TEST(FuseReLU, ReadersInPartialBackwardRanges) {
  const NetParameter param = testing::ParseNet(kReaders);
  auto fused = Build(param, TRAIN, true);
  // Between the Concat and the ReLUs before it, and between the MAX pooling and its ReLU.
  for (const char* first : {"cat", "maxpool"}) {
    int layer = 0;
    while (fused->layer_names()[layer] != first) ++layer;
    ExpectReadersIdentical(param, layer);
  }
}

// The automatic engine choice races a convolution with the ReLU fused into it, as the net's
// passes run it, and keeps that decision apart from the one for the same convolution without a
// ReLU (two identical layers on the same shape: without the distinction the second would take
// the first's decision).
TEST(FuseReLU, EngineRacesRunTheLayerWithItsFusedReLU) {
  if (!DnnlBuilt()) GTEST_SKIP() << "built without oneDNN: no engine to choose";
  const NetParameter param = testing::ParseNet(R"(
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 3 dim: 12 dim: 12 } } }
    layer { name: "plain" type: "Convolution" bottom: "data" top: "p"
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
    layer { name: "with_relu" type: "Convolution" bottom: "data" top: "f"
            convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
    layer { name: "relu" type: "ReLU" bottom: "f" top: "f" }
  )");
  ScopedCpuEngine autochoice(CpuEngine::kAuto);
  auto net = Build(param, TEST, true);
  ASSERT_EQ(Fused(*net), std::vector<std::string>{"relu>with_relu"});
  RandomWeights(net.get(), 3);
  FillRandom(net->input_blobs()[0], 4);
  const std::string cache = testing::TempDir() + "/cpu_engines.tsv";
  setenv("CREMA_CPU_ENGINE_CACHE", cache.c_str(), 1);
  net->PrepareCpuEngines();
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  std::ifstream in(cache);
  int forward = 0, relu = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Convolution ", 0) != 0 || line.find(" forward ") == std::string::npos) continue;
    ++forward;
    relu += line.find(" relu forward ") != std::string::npos;
  }
  EXPECT_EQ(forward, 2);
  EXPECT_EQ(relu, 1);
  // The layer left as the net's passes set it: the plain convolution's output keeps its
  // negative values, the fused one's has none.
  net->Forward();
  const Blob& p = *net->blob_by_name("p");
  const Blob& f = *net->blob_by_name("f");
  EXPECT_LT(*std::min_element(p.cpu_data<float>(), p.cpu_data<float>() + p.count()), 0.f);
  EXPECT_GE(*std::min_element(f.cpu_data<float>(), f.cpu_data<float>() + f.count()), 0.f);
}

}  // namespace
}  // namespace crema
