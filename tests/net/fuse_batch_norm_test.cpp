// BatchNorm groups (NetOptions::fuse_batch_norm): a BatchNorm and the in-place per-channel Scale
// (and ReLU) after it. Fused, every blob (data and diff), every parameter gradient and the
// BatchNorm statistics have the same bits as the layers run one by one, on the CPU (the Scale
// reads the BatchNorm's kept output) and on the GPU (one pass forward, two backward), also over
// partial Forward/Backward ranges; and only the groups the rule allows are formed.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <random>

#include "core/cuda_context.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "support/net_checks.hpp"

namespace crema {
namespace {

void FillRandom(Blob* blob, unsigned seed, float low = -1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) x[i] = uniform(rng);
}

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::unique_ptr<Net> Build(const NetParameter& param, Phase phase, bool fuse,
                           const Device& device) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(phase);
  options.verbose = false;
  options.fuse_batch_norm = fuse;
  options.device = device;
  return std::make_unique<Net>(param, options);
}

// "scale>bn" for each Scale and ReLU of a group.
std::vector<std::string> Grouped(const Net& net) {
  std::vector<std::string> names;
  for (int l = 0; l < net.num_layers(); ++l)
    if (net.fused_into_batch_norm()[l] >= 0)
      names.push_back(net.layer_names()[l] + ">" +
                      net.layer_names()[net.fused_into_batch_norm()[l]]);
  return names;
}

// Every blob, every parameter (the BatchNorm statistics among them) and, when `diffs`, every
// gradient.
void ExpectSame(const Net& plain, const Net& fused, bool diffs, const std::string& what) {
  testing::ExpectSameBlobs(plain, fused, diffs, true, what);
}

// Random weights (Scale factors around 1, some negative), equal in both nets.
void SameRandomWeights(Net* plain, Net* fused) {
  for (size_t j = 0; j < plain->learnable_params().size(); ++j)
    FillRandom(plain->learnable_params()[j], 7 + static_cast<unsigned>(j), -0.5f);
  for (const auto& layer : plain->layers())
    if (std::string(layer->type()) == "BatchNorm") {
      float* factor = layer->blobs()[2]->mutable_cpu_data<float>();
      factor[0] = 1.0f;
      float* var = layer->blobs()[1]->mutable_cpu_data<float>();
      for (int64_t c = 0; c < layer->blobs()[1]->count(); ++c) var[c] = 0.5f + std::abs(var[c]);
    }
  for (size_t j = 0; j < plain->learnable_params().size(); ++j)
    fused->learnable_params()[j]->CopyFrom(*plain->learnable_params()[j]);
}

void FillInputs(Net* net, unsigned seed) {
  for (size_t i = 0; i < net->input_blobs().size(); ++i)
    FillRandom(net->input_blobs()[i], seed + static_cast<unsigned>(i));
  if (net->has_blob("label")) {
    float* label = net->blob_by_name("label")->mutable_cpu_data<float>();
    for (int64_t i = 0; i < net->blob_by_name("label")->count(); ++i)
      label[i] = static_cast<float>(i % 3);
  }
}

std::vector<Device> Devices() {
  std::vector<Device> devices{Device::Cpu()};
  if (CudaDeviceCount() > 0) devices.push_back(Device::Cuda(0));
  return devices;
}

// Same bits on the GPU need the same cuDNN algorithms in both nets: deterministic ones.
class Deterministic {
 public:
  Deterministic() : before_(gpu::Deterministic()) { gpu::SetDeterministic(true); }
  ~Deterministic() { gpu::SetDeterministic(before_); }

 private:
  bool before_;
};

// Groups of every kind: BatchNorm in place and not (the fused Backward then leaves the Scale's
// input gradient in the BatchNorm's top, as unfused), Scale with and without a bias, with a ReLU
// (leaky too) and without; a BatchNorm on an input that needs no gradient (its group computes
// only the Scale's gradients, leaving the ReLU's input gradient in the top); not grouped: a Scale
// with a top of its own, a Scale over two axes, a BatchNorm whose output another in-place layer
// changes before the Scale.
const char* kGroups = R"(
  name: "groups"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 3 dim: 6 dim: 5 } shape { dim: 4 } } }
  layer { name: "bn0" type: "BatchNorm" bottom: "data" top: "bn0" }
  layer { name: "scale0" type: "Scale" bottom: "bn0" top: "bn0" scale_param { bias_term: true } }
  layer { name: "relu0" type: "ReLU" bottom: "bn0" top: "bn0" }
  layer { name: "conv1" type: "Convolution" bottom: "bn0" top: "conv1"
          convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
  layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
  layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1"
          scale_param { bias_term: true } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
          convolution_param { num_output: 5 kernel_size: 1 bias_term: false } }
  layer { name: "bn2" type: "BatchNorm" bottom: "conv2" top: "conv2" }
  layer { name: "scale2" type: "Scale" bottom: "conv2" top: "conv2" }
  layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2"
          relu_param { negative_slope: 0.1 } }
  layer { name: "bn3" type: "BatchNorm" bottom: "conv2" top: "bn3" }
  layer { name: "scale3" type: "Scale" bottom: "bn3" top: "bn3" scale_param { bias_term: true } }
  layer { name: "sum" type: "Eltwise" bottom: "bn3" bottom: "conv1" top: "sum" }
  layer { name: "bn4" type: "BatchNorm" bottom: "sum" top: "sum" }
  layer { name: "scale4" type: "Scale" bottom: "sum" top: "scale4"
          scale_param { bias_term: true } }
  layer { name: "bn5" type: "BatchNorm" bottom: "scale4" top: "scale4" }
  layer { name: "scale5" type: "Scale" bottom: "scale4" top: "scale4"
          scale_param { num_axes: 2 } }
  layer { name: "bn6" type: "BatchNorm" bottom: "scale4" top: "scale4" }
  layer { name: "power" type: "Power" bottom: "scale4" top: "scale4"
          power_param { power: 2 shift: 0.5 } }
  layer { name: "scale6" type: "Scale" bottom: "scale4" top: "scale4" }
  layer { name: "ip" type: "InnerProduct" bottom: "scale4" top: "ip"
          inner_product_param { num_output: 3 } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

TEST(FuseBatchNorm, FormsOnlyTheGroupsTheRuleAllows) {
  auto net = Build(Parse(kGroups), TRAIN, true, Device::Cpu());
  EXPECT_EQ(Grouped(*net),
            (std::vector<std::string>{"scale0>bn0", "relu0>bn0", "scale1>bn1", "relu1>bn1",
                                      "scale2>bn2", "relu2>bn2", "scale3>bn3"}));
  net->SetFuseBatchNorm(false);
  EXPECT_TRUE(Grouped(*net).empty());
  net->SetFuseBatchNorm(true);
  EXPECT_EQ(Grouped(*net).size(), 7u);
}

void ExpectTrainingIdentical(const NetParameter& param, const Device& device) {
  Deterministic deterministic;
  auto plain = Build(param, TRAIN, false, device);
  auto fused = Build(param, TRAIN, true, device);
  ASSERT_FALSE(Grouped(*fused).empty());
  SameRandomWeights(plain.get(), fused.get());
  for (int pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain.get(), fused.get()}) {
      FillInputs(net, 100 + pass);
      net->ClearParamDiffs();
      net->Forward();
      net->Backward();
    }
    ExpectSame(*plain, *fused, true, device.ToString() + " pass " + std::to_string(pass));
  }
}

TEST(FuseBatchNorm, TrainingGivesIdenticalBlobsAndGradients) {
  for (const Device& device : Devices()) ExpectTrainingIdentical(Parse(kGroups), device);
}

// Frozen statistics in TRAIN (fine-tuning with use_global_stats) under a learned Scale, and a
// frozen Scale (lr_mult 0): the group keeps the BatchNorm's output for the Scale's gradient, or
// computes none.
TEST(FuseBatchNorm, GlobalStatisticsAndFrozenScale) {
  const NetParameter param = Parse(R"(
    layer { name: "data" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 3 dim: 4 dim: 5 dim: 5 } shape { dim: 3 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
            batch_norm_param { use_global_stats: true } }
    layer { name: "scale" type: "Scale" bottom: "conv" top: "conv"
            scale_param { bias_term: true } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer { name: "conv2" type: "Convolution" bottom: "conv" top: "conv2"
            convolution_param { num_output: 4 kernel_size: 1 } }
    layer { name: "bn2" type: "BatchNorm" bottom: "conv2" top: "conv2" }
    layer { name: "scale2" type: "Scale" bottom: "conv2" top: "conv2"
            param { lr_mult: 0 } param { lr_mult: 0 } scale_param { bias_term: true } }
    layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
    layer { name: "ip" type: "InnerProduct" bottom: "conv2" top: "ip"
            inner_product_param { num_output: 3 } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
  )");
  for (const Device& device : Devices()) ExpectTrainingIdentical(param, device);
}

// A range that stops inside a group runs its layers one by one (as far as the range goes); a
// Backward range that splits a group too.
TEST(FuseBatchNorm, PartialRangesGiveIdenticalBlobs) {
  const NetParameter param = Parse(kGroups);
  for (const Device& device : Devices()) {
    Deterministic deterministic;
    auto plain = Build(param, TRAIN, false, device);
    auto fused = Build(param, TRAIN, true, device);
    SameRandomWeights(plain.get(), fused.get());
    const int bn1 = fused->layer_index("bn1"), scale1 = fused->layer_index("scale1");
    const int relu1 = fused->layer_index("relu1");
    const std::string where = device.ToString();
    for (Net* net : {plain.get(), fused.get()}) {
      FillInputs(net, 3);
      net->ForwardTo(bn1);
    }
    ExpectSame(*plain, *fused, false, where + " ForwardTo(bn1)");
    for (Net* net : {plain.get(), fused.get()}) net->ForwardFromTo(scale1, scale1);
    ExpectSame(*plain, *fused, false, where + " ForwardFromTo(scale1)");
    for (Net* net : {plain.get(), fused.get()}) net->ForwardFrom(relu1);
    ExpectSame(*plain, *fused, false, where + " ForwardFrom(relu1)");
    // The group ran as one up to the Scale, the ReLU on its own.
    for (Net* net : {plain.get(), fused.get()}) {
      net->ForwardTo(scale1);
      net->ForwardFrom(relu1);
    }
    ExpectSame(*plain, *fused, false, where + " ForwardTo(scale1), ForwardFrom(relu1)");
    for (Net* net : {plain.get(), fused.get()}) {
      net->Forward();
      net->ClearParamDiffs();
      net->BackwardFromTo(net->num_layers() - 1, scale1);
      net->BackwardFrom(bn1);
    }
    ExpectSame(*plain, *fused, true, where + " Backward split at the Scale");
  }
}

// Every BatchNorm of ResNet-50's and MobileNet v2's deploy nets is grouped; their inference
// forward is the same.
TEST(FuseBatchNorm, ZooDeployNetsGiveIdenticalOutputs) {
  for (const std::string model : {"resnet50/deploy.prototxt", "mobilenet_v2/deploy.prototxt"}) {
    NetParameter param;
    ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + model, &param);
    for (const Device& device : Devices()) {
      auto plain = Build(param, TEST, false, device);
      auto fused = Build(param, TEST, true, device);
      int batch_norms = 0;
      for (const auto& layer : fused->layers())
        batch_norms += std::string(layer->type()) == "BatchNorm";
      int grouped_scales = 0;
      for (int l = 0; l < fused->num_layers(); ++l)
        grouped_scales += fused->fused_into_batch_norm()[l] >= 0 &&
                          std::string(fused->layers()[l]->type()) == "Scale";
      EXPECT_EQ(grouped_scales, batch_norms) << model;
      SameRandomWeights(plain.get(), fused.get());
      for (Net* net : {plain.get(), fused.get()}) {
        for (Blob* input : net->input_blobs()) {
          std::vector<int> shape = input->shape();
          shape[0] = 1;
          input->Reshape(shape);
        }
        net->Reshape();
        FillInputs(net, 5);
        net->Forward();
      }
      ExpectSame(*plain, *fused, false, model + " on " + device.ToString());
    }
  }
}

}  // namespace
}  // namespace crema
