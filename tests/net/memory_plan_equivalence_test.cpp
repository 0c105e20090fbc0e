// The memory plan changes no result: every zoo deploy net forwards to bit-identical outputs with
// and without an inference plan, and SGD iterations on lenet, cifar10_quick and a net with
// BatchNorm, Split, Flatten and Concat give bit-identical weights with and without a training
// plan.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "net/memory_plan.hpp"
#include "support/net_checks.hpp"

namespace crema {
namespace {

void FillRandom(Blob* blob, unsigned seed, int classes = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i)
    x[i] = classes > 0 ? static_cast<float>(rng() % classes) : uniform(rng);
}

std::unique_ptr<Net> BuildNet(const NetParameter& param, Phase phase, MemoryPlan plan) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(phase);
  options.verbose = false;
  options.memory_plan = plan;
  return std::make_unique<Net>(param, options);
}

void ExpectSameOutputs(const Net& plain, const Net& planned, const std::string& what) {
  ASSERT_EQ(plain.output_blobs().size(), planned.output_blobs().size());
  for (size_t j = 0; j < plain.output_blobs().size(); ++j) {
    const Blob& a = *plain.output_blobs()[j];
    const Blob& b = *planned.output_blobs()[j];
    ASSERT_EQ(a.shape(), b.shape());
    const float* x = a.cpu_data<float>();
    const float* y = b.cpu_data<float>();
    int64_t differing = 0;
    for (int64_t i = 0; i < a.count(); ++i) differing += x[i] != y[i];
    EXPECT_EQ(differing, 0) << what << ": output " << j << " differs in " << differing << " of "
                            << a.count() << " values";
  }
}

class ZooDeploy : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooDeploy, InferencePlanGivesIdenticalOutputs) {
  const std::string path = std::string(CREMA_SOURCE_DIR) + "/models/" + GetParam();
  NetParameter param;
  ReadNetParamsFromTextFile(path, &param);
  auto plain = BuildNet(param, TEST, MemoryPlan::kOff);
  auto planned = BuildNet(param, TEST, MemoryPlan::kInference);
  testing::RandomInferenceWeights(plain.get(), 3);  // (the deploy nets' fillers give zeros)
  planned->ShareTrainedLayersWith(*plain);
  const MemoryPlanLayout layout = PlanNetMemory(*plain, MemoryPlan::kInference, {});
  EXPECT_LT(layout.after(), layout.before());
  // Batch 2 keeps the big nets quick; the reshape also re-plans.
  for (Net* net : {plain.get(), planned.get()}) {
    for (size_t i = 0; i < net->input_blobs().size(); ++i) {
      Blob* input = net->input_blobs()[i];
      std::vector<int> shape = input->shape();
      if (!shape.empty()) shape[0] = std::min(shape[0], 2);
      input->Reshape(shape);
    }
    net->Reshape();
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain.get(), planned.get()})
      for (size_t i = 0; i < net->input_blobs().size(); ++i)
        FillRandom(net->input_blobs()[i], 100 * pass + static_cast<unsigned>(i));
    plain->Forward();
    planned->Forward();
    ExpectSameOutputs(*plain, *planned, GetParam() + " pass " + std::to_string(pass));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ZooDeploy,
    ::testing::Values("lenet/lenet.prototxt", "cifar10_quick/deploy.prototxt",
                      "cifar10_full/deploy.prototxt", "bvlc_alexnet/deploy.prototxt",
                      "bvlc_reference_caffenet/deploy.prototxt", "bvlc_googlenet/deploy.prototxt",
                      "squeezenet_v1.1/deploy.prototxt", "mobilenet_v1/deploy.prototxt",
                      "mobilenet_v2/deploy.prototxt", "resnet50/deploy.prototxt",
                      "vgg16/deploy.prototxt"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param.substr(0, info.param.find('/'));
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// At batch 1 the inference plan puts a Concat's bottoms inside its top (ConcatInPlace): the
// convolutions write the concatenation, the Concat copies nothing, and the outputs keep their
// bits; a larger batch (the places no longer contiguous) places them on their own again.
TEST(InferencePlan, ConcatBottomsInsideTheTopAtBatchOne) {
  for (const char* model : {"squeezenet_v1.1/deploy.prototxt", "bvlc_googlenet/deploy.prototxt"}) {
    SCOPED_TRACE(model);
    NetParameter param;
    ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + model, &param);
    for (LayerParameter& layer : *param.mutable_layer())
      if (layer.type() == "Input") layer.mutable_input_param()->mutable_shape(0)->set_dim(0, 1);
    auto plain = BuildNet(param, TEST, MemoryPlan::kOff);
    auto planned = BuildNet(param, TEST, MemoryPlan::kInference);
    testing::RandomInferenceWeights(plain.get(), 7);  // (the deploy nets' fillers give zeros)
    planned->ShareTrainedLayersWith(*plain);
    const auto nested_groups = [](const Net& net) {
      const MemoryPlanLayout layout = PlanNetMemory(net, MemoryPlan::kInference, {});
      int nested = 0;
      for (const MemoryPlanLayout::Group& g : layout.data_groups) {
        if (!g.nested) continue;
        ++nested;
        const MemoryPlanLayout::Group& parent = layout.data_groups[g.parent];
        EXPECT_GE(g.offset, parent.offset);
        EXPECT_LE(static_cast<size_t>(g.offset) + g.bytes,
                  static_cast<size_t>(parent.offset) + parent.bytes);
      }
      EXPECT_FALSE(layout.concat_in_place_layers.empty());
      return nested;
    };
    EXPECT_GT(nested_groups(*plain), 0);
    // The built net's memory: each module's second bottom right after its first, in the top.
    const std::string module =
        std::string(model).rfind("squeeze", 0) == 0 ? "fire2/" : "inception_3a/";
    const Blob& concat =
        *planned->blob_by_name(module + (module == "fire2/" ? "concat" : "output"));
    const Blob& first = *planned->blob_by_name(module + (module == "fire2/" ? "expand1x1" : "1x1"));
    const Blob& second =
        *planned->blob_by_name(module + (module == "fire2/" ? "expand3x3" : "3x3"));
    EXPECT_EQ(first.cpu_data<float>(), concat.cpu_data<float>());
    EXPECT_EQ(second.cpu_data<float>(), concat.cpu_data<float>() + first.count());
    for (int batch : {1, 3}) {
      if (batch != 1) {
        for (Net* net : {plain.get(), planned.get()}) {
          std::vector<int> shape = net->input_blobs()[0]->shape();
          shape[0] = batch;
          net->input_blobs()[0]->Reshape(shape);
          net->Reshape();
        }
        EXPECT_EQ(nested_groups(*plain), 0);
      }
      for (int pass = 0; pass < 2; ++pass) {
        for (Net* net : {plain.get(), planned.get()})
          FillRandom(net->input_blobs()[0], 10 * batch + static_cast<unsigned>(pass));
        plain->Forward();
        planned->Forward();
        ExpectSameOutputs(*plain, *planned,
                          "batch " + std::to_string(batch) + " pass " + std::to_string(pass));
      }
    }
  }
}

TEST(ZooDeployList, CoversEveryModel) {
  // A new model folder must be added to the list above.
  int folders = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(CREMA_SOURCE_DIR) + "/models"))
    folders += entry.is_directory();
  EXPECT_EQ(folders, 11);
}

// Data layers become Input layers of the same tops (batch `batch`, images C x H x W).
NetParameter WithInputs(NetParameter param, int batch, int channels, int height, int width) {
  for (LayerParameter& layer : *param.mutable_layer()) {
    if (layer.type() != "Data") continue;
    LayerParameter input;
    input.set_name(layer.name());
    input.set_type("Input");
    *input.mutable_top() = layer.top();
    *input.mutable_include() = layer.include();
    BlobShape* image = input.mutable_input_param()->add_shape();
    for (int d : {batch, channels, height, width}) image->add_dim(d);
    input.mutable_input_param()->add_shape()->add_dim(batch);
    layer = input;
  }
  return param;
}

// Plain SGD (lr 0.01, no momentum) on both nets with the same batches; weights must stay equal.
void ExpectSameTraining(const NetParameter& param, int iterations, int classes) {
  auto plain = BuildNet(param, TRAIN, MemoryPlan::kOff);
  auto planned = BuildNet(param, TRAIN, MemoryPlan::kTraining);
  NetParameter weights;
  plain->ToProto(&weights);
  planned->CopyTrainedLayersFrom(weights);
  // The plan does share gradient buffers here.
  const MemoryPlanLayout layout = PlanNetMemory(*plain, MemoryPlan::kTraining, {});
  EXPECT_LT(layout.after(), layout.before());
  for (int it = 0; it < iterations; ++it) {
    for (Net* net : {plain.get(), planned.get()}) {
      FillRandom(net->input_blobs()[0], it);
      FillRandom(net->input_blobs()[1], 1000 + it, classes);
      net->ClearParamDiffs();
      net->Forward();
      net->Backward();
      for (Blob* p : net->learnable_params()) p->scale_diff(0.01);
      net->Update();
    }
    ExpectSameOutputs(*plain, *planned, "iteration " + std::to_string(it));
  }
  ASSERT_EQ(plain->learnable_params().size(), planned->learnable_params().size());
  for (size_t j = 0; j < plain->learnable_params().size(); ++j) {
    const Blob& a = *plain->learnable_params()[j];
    const Blob& b = *planned->learnable_params()[j];
    for (int64_t i = 0; i < a.count(); ++i)
      ASSERT_EQ(a.cpu_data<float>()[i], b.cpu_data<float>()[i]) << "param " << j << " at " << i;
  }
}

NetParameter ZooNet(const std::string& file) {
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + file, &param);
  return param;
}

TEST(TrainingPlan, LeNetSgdGivesIdenticalWeights) {
  ExpectSameTraining(WithInputs(ZooNet("lenet/lenet_train_test.prototxt"), 8, 1, 28, 28), 3, 10);
}

TEST(TrainingPlan, Cifar10QuickSgdGivesIdenticalWeights) {
  ExpectSameTraining(WithInputs(ZooNet("cifar10_quick/train_val.prototxt"), 8, 3, 32, 32), 3, 10);
}

// BatchNorm + Scale, a branch (Split) joined by Concat, Sigmoid, Flatten and TanH.
const char* kBatchNormNet = R"(
  name: "bn"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 3 dim: 10 dim: 10 } shape { dim: 4 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "xavier" } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
  layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
  layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
  layer { name: "a" type: "Convolution" bottom: "conv1" top: "a"
          convolution_param { num_output: 4 kernel_size: 1 weight_filler { type: "xavier" } } }
  layer { name: "b" type: "Convolution" bottom: "conv1" top: "b"
          convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn_b" type: "BatchNorm" bottom: "b" top: "bn_b" }
  layer { name: "cat" type: "Concat" bottom: "a" bottom: "bn_b" top: "cat" }
  layer { name: "sig" type: "Sigmoid" bottom: "cat" top: "sig" }
  layer { name: "pool" type: "Pooling" bottom: "sig" top: "pool"
          pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "flat" type: "Flatten" bottom: "pool" top: "flat" }
  layer { name: "tanh" type: "TanH" bottom: "flat" top: "drop" }
  layer { name: "ip" type: "InnerProduct" bottom: "drop" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

TEST(TrainingPlan, BatchNormNetSgdGivesIdenticalWeights) {
  NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kBatchNormNet, &param));
  ExpectSameTraining(param, 4, 5);
}

// Residual sums: an identity and a projection shortcut, an Eltwise SUM with a coefficient of 2,
// and one whose bottom is a Split's top.
const char* kResidualNet = R"(
  name: "residual"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 4 dim: 6 dim: 6 } shape { dim: 4 } } }
  layer { name: "c0" type: "Convolution" bottom: "data" top: "c0"
          convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "relu0" type: "ReLU" bottom: "c0" top: "c0" }
  layer { name: "b1" type: "Convolution" bottom: "c0" top: "b1"
          convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn_b1" type: "BatchNorm" bottom: "b1" top: "b1" }
  layer { name: "scale_b1" type: "Scale" bottom: "b1" top: "b1" scale_param { bias_term: true } }
  layer { name: "s1" type: "Eltwise" bottom: "c0" bottom: "b1" top: "s1" }
  layer { name: "relu_s1" type: "ReLU" bottom: "s1" top: "s1" }
  layer { name: "p2" type: "Convolution" bottom: "s1" top: "p2"
          convolution_param { num_output: 6 kernel_size: 1 weight_filler { type: "xavier" } } }
  layer { name: "b2" type: "Convolution" bottom: "s1" top: "b2"
          convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "bn_b2" type: "BatchNorm" bottom: "b2" top: "b2" }
  layer { name: "s2" type: "Eltwise" bottom: "p2" bottom: "b2" top: "s2"
          eltwise_param { coeff: 1 coeff: 2 } }
  layer { name: "b3" type: "Convolution" bottom: "s2" top: "b3"
          convolution_param { num_output: 6 kernel_size: 1 weight_filler { type: "xavier" } } }
  layer { name: "s3" type: "Eltwise" bottom: "b3" bottom: "s2" top: "s3" }
  layer { name: "relu_s3" type: "ReLU" bottom: "s3" top: "s3" }
  layer { name: "ip" type: "InnerProduct" bottom: "s3" top: "ip"
          inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

// The training plan gives an Eltwise SUM of ones' top and one bottom one gradient buffer (its
// Backward then copies only into the others), and the weights stay those of the unplanned net.
TEST(TrainingPlan, ResidualSumsShareAGradientBufferAndGiveIdenticalWeights) {
  NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kResidualNet, &param));
  ExpectSameTraining(param, 4, 5);
  auto net = BuildNet(param, TRAIN, MemoryPlan::kOff);
  const MemoryPlanLayout layout = PlanNetMemory(*net, MemoryPlan::kTraining, {});
  const auto diff_offset = [&](const std::string& name) {
    const auto& names = net->blob_names();
    const size_t b = std::find(names.begin(), names.end(), name) - names.begin();
    EXPECT_LT(b, names.size()) << name;
    return b < names.size() ? layout.blobs[b].diff_offset : int64_t{-2};
  };
  // s1's sum: the branch (its last bottom, touched last by the sum) shares, the shortcut (a
  // Split's top, whose diff the Split reads after the branch ran) gets a copy.
  EXPECT_GE(diff_offset("s1"), 0);
  EXPECT_EQ(diff_offset("s1"), diff_offset("b1"));
  EXPECT_NE(diff_offset("s1"), diff_offset("c0_relu0_0_split_0"));
  // s3 sums b3 and s2's Split top: the last bottom that the sum touches last shares.
  EXPECT_EQ(diff_offset("s3"),
            diff_offset(net->blob_names()[net->bottom_ids(
                std::find(net->layer_names().begin(), net->layer_names().end(), "s3") -
                net->layer_names().begin())[1]]));
  EXPECT_NE(diff_offset("s3"), diff_offset("b3"));
  // A coefficient of 2 scales instead of copying: no sharing.
  EXPECT_NE(diff_offset("s2"), diff_offset("b2"));
  EXPECT_NE(diff_offset("s2"), diff_offset("p2"));
}

}  // namespace
}  // namespace crema
