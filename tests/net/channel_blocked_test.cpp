// Channel-blocked layouts between oneDNN layers (NetOptions::channel_blocked, net_layout.cpp):
// with oneDNN running every convolution and pooling, an inference net gives the same bits with
// blocked layouts as without (the reorders it saves are exact copies), on the zoo's deploy nets
// and on a net with every kind of reader (pass-through, oneDNN, plain-only, kept blobs); outputs
// and kept blobs are always plain; the automatic engine choice runs on blocked data too.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "layers/convolution/convolution_layer.hpp"
#include "math/blocked_conv.hpp"
#include "math/dnnl_engine.hpp"
#include "support/gradient_checker.hpp"
#include "support/net_checks.hpp"

namespace crema {
namespace {

std::unique_ptr<Net> Build(const NetParameter& param, bool blocked, bool fold_bn,
                           const std::vector<std::string>& keep = {}) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TEST);
  options.verbose = false;
  options.memory_plan = MemoryPlan::kInference;
  options.keep_blobs = keep;
  options.fold_batch_norm = fold_bn;
  options.channel_blocked = blocked;
  return std::make_unique<Net>(param, options);
}

int AllowedBlobs(const Net& net) {
  int allowed = 0;
  for (const BlobPtr& blob : net.blobs()) allowed += blob->channel_block_allowed();
  return allowed;
}

// Builds `param` blocked and plain with the same weights, runs both twice at batch `batch` on the
// same inputs and expects the same bits in every output (and in `keep`).
void ExpectBlockedEqualsPlain(const NetParameter& param, bool fold_bn, int batch,
                              const std::vector<std::string>& keep = {}) {
  auto plain = Build(param, false, fold_bn, keep);
  auto blocked = Build(param, true, fold_bn, keep);
  EXPECT_EQ(AllowedBlobs(*plain), 0);
  if (ChannelBlock() > 0) EXPECT_GT(AllowedBlobs(*blocked), 0);
  testing::RandomInferenceWeights(plain.get(), 100);
  blocked->ShareTrainedLayersWith(*plain);
  for (Net* net : {plain.get(), blocked.get()}) testing::SetBatch(net, batch);
  for (int pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain.get(), blocked.get()}) {
      for (size_t i = 0; i < net->input_blobs().size(); ++i)
        testing::FillUniform(net->input_blobs()[i], -1, 1, 17 + pass + static_cast<uint32_t>(i));
      net->Forward();
    }
    // Something stayed blocked between layers (the last writer of each planned buffer decides
    // what it holds now).
    int blocked_now = 0;
    for (const BlobPtr& blob : blocked->blobs()) blocked_now += blob->cpu_channel_block() > 0;
    if (ChannelBlock() > 0 && GetCpuEngine() == CpuEngine::kDnnl) EXPECT_GT(blocked_now, 0);
    for (size_t i = 0; i < blocked->output_blobs().size(); ++i) {
      const Blob& out = *blocked->output_blobs()[i];
      EXPECT_EQ(out.cpu_channel_block(), 0);
      EXPECT_TRUE(testing::SameBits(*plain->output_blobs()[i], out, false))
          << "output " << i << ", pass " << pass;
    }
    for (const std::string& name : keep) {
      EXPECT_EQ(blocked->blob_by_name(name)->cpu_channel_block(), 0) << name;
      EXPECT_TRUE(
          testing::SameBits(*plain->blob_by_name(name), *blocked->blob_by_name(name), false))
          << name << ", pass " << pass;
    }
  }
}

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

// oneDNN convolutions and pooling (blocked), pass-through readers (ReLU, Split, Eltwise, Concat
// on channels, Dropout), a reader of plain data only (Scale, LRN, Concat on another axis), a
// kept blob inside a blocked chain, and a fused ReLU inside a convolution.
const char* kEveryReader = R"(
  layer { name: "data" type: "Input" top: "data"
          input_param { shape { dim: 2 dim: 3 dim: 19 dim: 17 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
          pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
  layer { name: "a" type: "Convolution" bottom: "pool1" top: "a"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "b" type: "Convolution" bottom: "pool1" top: "b"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
  layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "sum" }
  layer { name: "relu2" type: "ReLU" bottom: "sum" top: "sum" }
  layer { name: "c" type: "Convolution" bottom: "sum" top: "c"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 group: 2 } }
  layer { name: "kept" type: "Convolution" bottom: "sum" top: "kept"
          convolution_param { num_output: 16 kernel_size: 1 bias_term: false } }
  layer { name: "cat" type: "Concat" bottom: "c" bottom: "kept" bottom: "sum" top: "cat" }
  layer { name: "drop" type: "Dropout" bottom: "cat" top: "drop" }
  layer { name: "d" type: "Convolution" bottom: "drop" top: "d"
          convolution_param { num_output: 16 kernel_size: 3 stride: 2 } }
  layer { name: "scale" type: "Scale" bottom: "d" top: "d" scale_param { bias_term: true } }
  layer { name: "e" type: "Convolution" bottom: "d" top: "e"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "lrn" type: "LRN" bottom: "e" top: "lrn" }
  layer { name: "f" type: "Convolution" bottom: "e" top: "f"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "wide" type: "Concat" bottom: "f" bottom: "e" top: "wide"
          concat_param { axis: 3 } }
  layer { name: "pool2" type: "Pooling" bottom: "f" top: "pool2"
          pooling_param { pool: AVE global_pooling: true } }
  layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
          inner_product_param { num_output: 5 } }
)";

TEST(ChannelBlocked, EveryKindOfReaderGivesThePlainBits) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  ExpectBlockedEqualsPlain(Parse(kEveryReader), false, 2, {"kept"});
}

// After passes that ran oneDNN's forward directly on the kept set-up (DnnlDirectForward), a new
// batch size (new primitives) and new weights (the kept reordered copy refreshed) still give the
// plain net's bits.
TEST(ChannelBlocked, NewBatchAndWeightsAfterDirectCallsGiveThePlainBits) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  const NetParameter param = Parse(kEveryReader);
  auto plain = Build(param, false, false, {"kept"});
  auto blocked = Build(param, true, false, {"kept"});
  testing::RandomInferenceWeights(plain.get(), 100);
  blocked->ShareTrainedLayersWith(*plain);
  const auto expect_same = [&](int batch, uint32_t seed, const char* what) {
    for (Net* net : {plain.get(), blocked.get()}) {
      testing::SetBatch(net, batch);
      testing::FillUniform(net->input_blobs()[0], -1, 1, seed);
      net->Forward();
    }
    for (size_t i = 0; i < blocked->output_blobs().size(); ++i)
      EXPECT_TRUE(testing::SameBits(*plain->output_blobs()[i], *blocked->output_blobs()[i], false))
          << what << ", output " << i;
  };
  expect_same(2, 1, "first pass");
  expect_same(2, 2, "second pass");
  expect_same(3, 3, "batch 3");
  expect_same(1, 4, "batch 1");
  testing::RandomInferenceWeights(plain.get(), 200);  // the blocked net shares these blobs
  expect_same(1, 5, "new weights");
  expect_same(2, 6, "new weights, batch 2");
}

// Which blobs may be blocked: those that only layers taking the blocked layout read; not inputs,
// outputs, kept blobs, or blobs with channels that are no multiple of the block.
TEST(ChannelBlocked, AllowsOnlyBlobsEveryReaderTakes) {
  if (ChannelBlock() == 0) GTEST_SKIP() << "no oneDNN or no AVX2 here: nothing is blocked";
  auto net = Build(Parse(kEveryReader), true, false, {"kept"});
  const auto allowed = [&](const std::string& name) {
    return net->blob_by_name(name)->channel_block_allowed();
  };
  for (const char* name : {"conv1", "pool1", "a", "b", "sum", "c", "cat", "drop"})
    EXPECT_TRUE(allowed(name)) << name;
  // data: input; kept: kept; d: read by Scale; e: read by LRN; f: read by the Concat on axis 3;
  // the outputs; pool2: one position.
  for (const char* name : {"data", "kept", "d", "e", "f", "lrn", "wide", "pool2", "fc"})
    EXPECT_FALSE(allowed(name)) << name;
  // The layers whose input arrives blocked or whose output may be written blocked race oneDNN's
  // kernels only; the others, and all once blocking is off, crema's too (d reads the Concat of
  // the plain kept blob, hence plain; f and pool2 read a Split's top that another reader needs
  // plain).
  const auto crema_races = [&](const std::string& name) {
    return net->layer_by_name(name)->cpu_engine_choice()->crema_races();
  };
  for (const char* name : {"conv1", "pool1", "a", "b", "c", "kept"})
    EXPECT_FALSE(crema_races(name)) << name;
  for (const char* name : {"d", "e", "f", "pool2", "fc"}) EXPECT_TRUE(crema_races(name)) << name;
  // The blocked tags after a pass: the last writer of the planned memory decides, so only
  // check that the outputs are plain and something was blocked on the way.
  testing::RandomInferenceWeights(net.get(), 100);
  testing::FillUniform(net->input_blobs()[0], -1, 1);
  net->Forward();
  for (const Blob* out : net->output_blobs()) EXPECT_EQ(out->cpu_channel_block(), 0);
  // Turning it off puts what is still blocked back to plain.
  net->SetChannelBlocked(false);
  for (const BlobPtr& blob : net->blobs()) EXPECT_EQ(blob->cpu_channel_block(), 0);
  EXPECT_EQ(AllowedBlobs(*net), 0);
  for (const char* name : {"conv1", "pool1", "a", "d", "e"}) EXPECT_TRUE(crema_races(name)) << name;
}

// Nothing is blocked with crema's kernels, or without a memory plan.
TEST(ChannelBlocked, NeedsOneDnnAndAMemoryPlan) {
  {
    ScopedCpuEngine caffe(CpuEngine::kCaffe);
    auto net = Build(Parse(kEveryReader), true, false);
    testing::RandomInferenceWeights(net.get(), 100);
    net->Forward();
    for (const BlobPtr& blob : net->blobs()) EXPECT_EQ(blob->cpu_channel_block(), 0);
  }
  NetOptions options;
  options.verbose = false;
  options.channel_blocked = true;
  Net unplanned(Parse(kEveryReader), options);
  EXPECT_EQ(AllowedBlobs(unplanned), 0);
}

// The automatic choice races oneDNN on blocked inputs where the net gives them (its scratch
// blobs carry the layouts), and crema's kernels on plain ones outside the blocked chain; the
// result matches crema's kernels within float rounding.
// `param` built blocked (`net`, for the current engine policy) and plain under crema's kernels
// (`reference`), with the same weights and input, the reference run once.
struct AgainstCaffe {
  std::unique_ptr<Net> reference, net;
};
AgainstCaffe BuildAgainstCaffe(const NetParameter& param) {
  AgainstCaffe nets;
  ScopedCpuEngine caffe(CpuEngine::kCaffe);
  nets.reference = Build(param, false, false);
  nets.net = Build(param, true, false);
  testing::RandomInferenceWeights(nets.reference.get(), 100);
  nets.net->ShareTrainedLayersWith(*nets.reference);
  testing::FillUniform(nets.reference->input_blobs()[0], -1, 1, 5);
  nets.net->input_blobs()[0]->CopyFrom(*nets.reference->input_blobs()[0]);
  nets.reference->Forward();
  return nets;
}

// The net's output within float rounding of the reference's.
void ExpectNearReference(const AgainstCaffe& nets, int pass) {
  const Blob& got = *nets.net->output_blobs()[0];
  const Blob& want = *nets.reference->output_blobs()[0];
  ASSERT_EQ(got.count(), want.count());
  for (int64_t i = 0; i < got.count(); ++i)
    ASSERT_NEAR(got.cpu_data<float>()[i], want.cpu_data<float>()[i],
                1e-4 * (1 + std::abs(want.cpu_data<float>()[i])))
        << i << ", pass " << pass;
}

TEST(ChannelBlocked, AutomaticEngineChoiceOnBlockedData) {
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  const AgainstCaffe nets = BuildAgainstCaffe(Parse(kEveryReader));
  ScopedCpuEngine autochoice(CpuEngine::kAuto);
  nets.net->PrepareCpuEngines();
  for (int pass = 0; pass < 3; ++pass) nets.net->Forward();
  // In the blocked chain the blocked layout's kernels only (crema's plain ones would convert the
  // layouts).
  if (ChannelBlock() > 0) {
    for (const char* name : {"conv1", "pool1", "a", "b", "c", "kept"})
      EXPECT_STRNE(nets.net->layer_by_name(name)->cpu_engine_choice()->last(), "crema") << name;
  }
  ExpectNearReference(nets, 2);
}

// crema's kernels on the blocked layout (math/blocked_conv.hpp, 3x3; pointwise_depthwise.hpp,
// 1x1 and depthwise) where the race keeps them: the 3x3 one reads the net's plain input or the
// blocked output of the convolution before it, each writes blocked output for the next, with its
// fused ReLU, and the net's output is the reference's within float rounding. A training net never
// races it (its passes are inference's).
TEST(ChannelBlocked, CremasBlockedKernelInTheChain) {
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  const AgainstCaffe nets = BuildAgainstCaffe(Parse(R"(
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 16 dim: 9 dim: 11 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
    layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
            convolution_param { num_output: 48 kernel_size: 3 pad: 1 } }
    layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2"
            relu_param { negative_slope: 0.1 } }
    layer { name: "conv3" type: "Convolution" bottom: "conv2" top: "conv3"
            convolution_param { num_output: 32 kernel_size: 1 } }
    layer { name: "dw" type: "Convolution" bottom: "conv3" top: "dw"
            convolution_param { num_output: 32 group: 32 kernel_size: 3 pad: 1 stride: 2 } }
    layer { name: "relu_dw" type: "ReLU" bottom: "dw" top: "dw" }
    layer { name: "conv4" type: "Convolution" bottom: "dw" top: "conv4"
            convolution_param { num_output: 16 kernel_size: 1 } }
  )"));
  ScopedCpuEngine autochoice(CpuEngine::kAuto);
  // The choices a race could make, made: crema's blocked kernels on the net's plain input
  // (conv1), then on blocked data.
  const auto decide = [&](const char* layer, std::vector<int> shape, CpuKernel kernel) {
    nets.net->layer_by_name(layer)->cpu_engine_choice()->Restore({"forward", shape, kernel});
  };
  decide("conv1", {2, 16, 9, 11}, CpuKernel::kCremaBlocked);
  decide("conv2", {2, 32, 9, 11}, CpuKernel::kCremaBlocked);
  decide("conv3", {2, 48, 9, 11}, CpuKernel::kCremaBlocked);
  decide("dw", {2, 32, 9, 11}, CpuKernel::kCremaBlocked);  // (depthwise, stride 2, ReLU fused)
  // (The output's writer writes it plain: oneDNN's kernel, whatever the decision.)
  decide("conv4", {2, 32, 5, 6}, CpuKernel::kCremaBlocked);
  // (Without AVX-512 or oneDNN, the decisions run oneDNN's kernel, or crema's plain one.)
  const bool runs = ChannelBlock() == 16 && cpu::BlockedConv3x3Applies({16, 32, 9, 11});
  for (int pass = 0; pass < 2; ++pass) {
    nets.net->Forward();
    for (const char* name : {"conv1", "conv2", "conv3", "dw", "conv4"})
      EXPECT_EQ(dynamic_cast<const ConvolutionLayer&>(*nets.net->layer_by_name(name)).blocked_ran(),
                runs && std::string(name) != "conv4")
          << name;
    ExpectNearReference(nets, pass);
  }
}

// Global average pooling in inference: crema's blocked kernel reads the blocked chain as it is
// and gives the bits of crema's plain kernel on the same values (each channel's sum in the
// plane's order), where the plain kernel has the net convert its input first.
TEST(ChannelBlocked, GlobalAveragePoolingOnTheBlockedLayout) {
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  const NetParameter param = Parse(R"(
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 16 dim: 7 dim: 9 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 48 kernel_size: 3 pad: 1 } }
    layer { name: "pool" type: "Pooling" bottom: "conv1" top: "pool"
            pooling_param { pool: AVE global_pooling: true } }
  )");
  const AgainstCaffe nets = BuildAgainstCaffe(param);
  std::unique_ptr<Net> plain;
  {
    ScopedCpuEngine caffe(CpuEngine::kCaffe);
    plain = Build(param, true, false);
  }
  plain->ShareTrainedLayersWith(*nets.reference);
  plain->input_blobs()[0]->CopyFrom(*nets.reference->input_blobs()[0]);
  ScopedCpuEngine autochoice(CpuEngine::kAuto);
  for (Net* net : {nets.net.get(), plain.get()})
    net->layer_by_name("conv1")->cpu_engine_choice()->Restore(
        {"forward", {2, 16, 7, 9}, CpuKernel::kDnnl});
  nets.net->layer_by_name("pool")->cpu_engine_choice()->Restore(
      {"forward", {2, 48, 7, 9}, CpuKernel::kCremaBlocked});
  plain->layer_by_name("pool")->cpu_engine_choice()->Restore(
      {"forward", {2, 48, 7, 9}, CpuKernel::kCrema});
  for (int pass = 0; pass < 2; ++pass) {
    nets.net->Forward();
    plain->Forward();
    if (ChannelBlock() > 0) {
      EXPECT_STREQ(nets.net->layer_by_name("pool")->cpu_engine_choice()->last(), "crema-blocked");
      EXPECT_STREQ(plain->layer_by_name("pool")->cpu_engine_choice()->last(), "crema");
      EXPECT_GT(nets.net->blob_by_name("conv1")->cpu_channel_block(), 0);
    }
    ExpectNearReference(nets, pass);
    const Blob& got = *nets.net->output_blobs()[0];
    const Blob& want = *plain->output_blobs()[0];
    ASSERT_EQ(got.count(), want.count());
    EXPECT_EQ(
        0, std::memcmp(got.cpu_data<float>(), want.cpu_data<float>(), got.count() * sizeof(float)))
        << "pass " << pass;
  }
}

// Training: oneDNN convolutions and pooling (blocked forward and backward), pass-through layers
// whose gradients pass blocked (ReLU, Split, Eltwise SUM and PROD, Concat on channels), a
// BatchNorm group with its Scale and ReLU (blocked, its sums in the plain order), and readers of
// plain values and gradients only between them (LRN, a Concat on another axis, the loss).
const char* kTrainingReaders = R"(
  layer { name: "data" type: "Input" top: "data"
          input_param { shape { dim: 2 dim: 3 dim: 19 dim: 17 } } }
  layer { name: "target" type: "Input" top: "target" input_param { shape { dim: 2 dim: 5 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "pool1" type: "Pooling" bottom: "conv2" top: "pool1"
          pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
  layer { name: "a" type: "Convolution" bottom: "pool1" top: "a"
          convolution_param { num_output: 32 kernel_size: 1 } }
  layer { name: "relu_a" type: "ReLU" bottom: "a" top: "a" }
  layer { name: "b" type: "Convolution" bottom: "a" top: "b"
          convolution_param { num_output: 32 kernel_size: 3 pad: 1 } }
  layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "sum" }
  layer { name: "relu2" type: "ReLU" bottom: "sum" top: "sum" }
  layer { name: "c" type: "Convolution" bottom: "sum" top: "c"
          convolution_param { num_output: 16 kernel_size: 3 pad: 1 group: 2 } }
  layer { name: "k" type: "Convolution" bottom: "sum" top: "k"
          convolution_param { num_output: 16 kernel_size: 1 bias_term: false } }
  layer { name: "prod" type: "Eltwise" bottom: "c" bottom: "k" top: "prod"
          eltwise_param { operation: PROD } }
  layer { name: "cat" type: "Concat" bottom: "prod" bottom: "k" bottom: "sum" top: "cat" }
  layer { name: "relu3" type: "ReLU" bottom: "cat" top: "cat" }
  layer { name: "d" type: "Convolution" bottom: "cat" top: "d"
          convolution_param { num_output: 16 kernel_size: 3 stride: 2 } }
  layer { name: "bn" type: "BatchNorm" bottom: "d" top: "d" }
  layer { name: "scale" type: "Scale" bottom: "d" top: "d" scale_param { bias_term: true } }
  layer { name: "relu4" type: "ReLU" bottom: "d" top: "d" }
  layer { name: "e" type: "Convolution" bottom: "d" top: "e"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "f" type: "Convolution" bottom: "e" top: "f"
          convolution_param { num_output: 16 kernel_size: 1 } }
  layer { name: "lrn" type: "LRN" bottom: "f" top: "lrn" }
  layer { name: "wide" type: "Concat" bottom: "lrn" bottom: "e" top: "wide"
          concat_param { axis: 3 } }
  layer { name: "pool2" type: "Pooling" bottom: "wide" top: "pool2"
          pooling_param { pool: AVE global_pooling: true } }
  layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
          inner_product_param { num_output: 5 } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "fc" bottom: "target" top: "loss" }
)";

std::unique_ptr<Net> BuildTraining(const NetParameter& param, bool blocked) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TRAIN);
  options.verbose = false;
  options.memory_plan = MemoryPlan::kTraining;
  options.channel_blocked = blocked;
  return std::make_unique<Net>(param, options);
}

// Iterations of training with oneDNN running the convolutions give the same bits (loss,
// gradients, weights) blocked as plain: the reorders blocking saves are exact copies.
TEST(ChannelBlocked, TrainingGivesThePlainBits) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  const NetParameter param = Parse(kTrainingReaders);
  auto plain = BuildTraining(param, false);
  auto blocked = BuildTraining(param, true);
  EXPECT_EQ(AllowedBlobs(*plain), 0);
  if (ChannelBlock() > 0) {
    // conv1's output passes blocked to conv2 through the ReLU (value, then gradient), and so on
    // through the MAX pooling and the BatchNorm group; not e (read by the Concat on axis 3) or f
    // (LRN's).
    for (const char* name :
         {"conv1", "conv2", "pool1", "a", "b", "sum", "c", "k", "prod", "cat", "d"})
      EXPECT_TRUE(blocked->blob_by_name(name)->channel_block_allowed()) << name;
    for (const char* name : {"data", "e", "f", "lrn", "pool2", "fc"})
      EXPECT_FALSE(blocked->blob_by_name(name)->channel_block_allowed()) << name;
  }
  // The same weights, each net its own (the updates below change them).
  testing::RandomInferenceWeights(plain.get(), 100);
  testing::RandomInferenceWeights(blocked.get(), 100);
  for (int iteration = 0; iteration < 3; ++iteration) {
    double loss[2];
    int blocked_values = 0, blocked_gradients = 0;
    for (int k = 0; k < 2; ++k) {
      Net* net = k == 0 ? plain.get() : blocked.get();
      testing::FillUniform(net->blob_by_name("data").get(), -1, 1, 7 + iteration);
      testing::FillUniform(net->blob_by_name("target").get(), -1, 1, 9 + iteration);
      net->ClearParamDiffs();
      net->Forward();
      loss[k] = net->blob_by_name("loss")->cpu_data<float>()[0];
      // Values and gradients stayed blocked between layers (the last writer of each planned
      // buffer decides what it holds after the pass).
      for (const BlobPtr& blob : net->blobs()) blocked_values += blob->cpu_channel_block() > 0;
      // The BatchNorm group computed on blocked values, and its gradient (in place) blocked.
      const Blob& d = *net->blob_by_name("d");
      if (k == 1 && ChannelBlock() > 0) EXPECT_EQ(d.cpu_channel_block(), ChannelBlock());
      net->Backward();
      for (const BlobPtr& blob : net->blobs())
        blocked_gradients += blob->cpu_diff_channel_block() > 0;
      if (k == 1 && ChannelBlock() > 0) EXPECT_EQ(d.cpu_diff_channel_block(), ChannelBlock());
    }
    if (ChannelBlock() > 0) {
      EXPECT_GT(blocked_values, 0) << "iteration " << iteration;
      EXPECT_GT(blocked_gradients, 0) << "iteration " << iteration;
    }
    EXPECT_EQ(loss[0], loss[1]) << "iteration " << iteration;
    const auto& want = plain->learnable_params();
    const auto& got = blocked->learnable_params();
    ASSERT_EQ(want.size(), got.size());
    for (size_t p = 0; p < want.size(); ++p) {
      EXPECT_TRUE(testing::SameBits(*want[p], *got[p], true))
          << "gradient of parameter " << p << ", iteration " << iteration;
      EXPECT_TRUE(testing::SameBits(*want[p], *got[p], false))
          << "parameter " << p << ", iteration " << iteration;
    }
    plain->Update();
    blocked->Update();
  }
}

// A BatchNorm group that ran fused on blocked values, whose backward runs layer by layer (a
// BackwardFromTo starting at its Scale): the Scale reads the BatchNorm's kept y put back to
// plain, and the gradients are the plain net's bits.
TEST(ChannelBlocked, BatchNormGroupBackwardLayerByLayerGivesThePlainBits) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  const NetParameter param = Parse(kTrainingReaders);
  auto plain = BuildTraining(param, false);
  auto blocked = BuildTraining(param, true);
  testing::RandomInferenceWeights(plain.get(), 100);
  testing::RandomInferenceWeights(blocked.get(), 100);
  const auto index = [&](const char* name) {
    const std::vector<std::string>& names = plain->layer_names();
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  for (Net* net : {plain.get(), blocked.get()}) {
    testing::FillUniform(net->blob_by_name("data").get(), -1, 1, 3);
    testing::FillUniform(net->blob_by_name("target").get(), -1, 1, 4);
    net->ClearParamDiffs();
    net->Forward();
    if (net == blocked.get() && ChannelBlock() > 0)
      EXPECT_EQ(net->blob_by_name("d")->cpu_channel_block(), ChannelBlock());
    net->BackwardFromTo(net->num_layers() - 1, index("relu4"));
    net->BackwardFromTo(index("scale"), 0);
  }
  const auto& want = plain->learnable_params();
  const auto& got = blocked->learnable_params();
  ASSERT_EQ(want.size(), got.size());
  for (size_t p = 0; p < want.size(); ++p)
    EXPECT_TRUE(testing::SameBits(*want[p], *got[p], true)) << "gradient of parameter " << p;
}

// The automatic choice in a net that trains: its races run the backward passes on the layouts
// the net gives them (blocked top gradients where the values are), and the gradients match
// crema's kernels within float rounding.
TEST(ChannelBlocked, AutomaticEngineChoiceInTraining) {
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  const NetParameter param = Parse(kTrainingReaders);
  std::unique_ptr<Net> reference;
  {
    ScopedCpuEngine caffe(CpuEngine::kCaffe);
    reference = BuildTraining(param, false);
  }
  ScopedCpuEngine autochoice(CpuEngine::kAuto);
  auto net = BuildTraining(param, true);
  for (Net* n : {reference.get(), net.get()}) {
    testing::RandomInferenceWeights(n, 100);
    testing::FillUniform(n->blob_by_name("data").get(), -1, 1, 5);
    testing::FillUniform(n->blob_by_name("target").get(), -1, 1, 6);
  }
  {
    ScopedCpuEngine caffe(CpuEngine::kCaffe);
    reference->ClearParamDiffs();
    reference->Forward();
    reference->Backward();
  }
  net->PrepareCpuEngines();
  for (int pass = 0; pass < 2; ++pass) {
    net->ClearParamDiffs();
    net->Forward();
    net->Backward();
  }
  if (ChannelBlock() > 0)
    for (const char* name : {"conv2", "pool1", "a", "b", "c", "k", "d"})
      EXPECT_STRNE(net->layer_by_name(name)->cpu_engine_choice()->last(), "crema") << name;
  for (const auto& layer : net->layers())
    if (const CpuEngineChoice* choice = layer->cpu_engine_choice())
      for (const CpuEngineChoice::Decision& d : choice->Decisions())
        EXPECT_NE(d.kernel, CpuKernel::kCremaBlocked) << layer->name() << " " << d.direction;
  const auto& want = reference->learnable_params();
  const auto& got = net->learnable_params();
  ASSERT_EQ(want.size(), got.size());
  for (size_t p = 0; p < want.size(); ++p) {
    ASSERT_EQ(want[p]->count(), got[p]->count());
    for (int64_t i = 0; i < want[p]->count(); ++i) {
      const float w = want[p]->cpu_diff<float>()[i];
      EXPECT_NEAR(got[p]->cpu_diff<float>()[i], w, 1e-4 * (1 + std::abs(w)))
          << "gradient of parameter " << p << " at " << i;
    }
  }
}

class ZooDeploy : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooDeploy, BlockedOutputsEqualPlain) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + GetParam(), &param);
  ExpectBlockedEqualsPlain(param, true, 1);
}

// Without BatchNorm folding, the BatchNorm groups (global statistics) run on blocked values.
TEST_P(ZooDeploy, BlockedOutputsEqualPlainWithBatchNormGroups) {
  ScopedCpuEngine dnnl(CpuEngine::kDnnl);
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + GetParam(), &param);
  ExpectBlockedEqualsPlain(param, false, 1);
}

INSTANTIATE_TEST_SUITE_P(Models, ZooDeploy,
                         ::testing::Values("resnet50/deploy.prototxt",
                                           "mobilenet_v1/deploy.prototxt",
                                           "bvlc_googlenet/deploy.prototxt",
                                           "squeezenet_v1.1/deploy.prototxt"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.find('/'));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace crema
