// Folding BatchNorm (+ Scale) into the preceding convolution (NetOptions::fold_batch_norm): the
// folded net's outputs equal the unfolded net's (the BatchNorm and Scale layers run as written),
// the layers folded are exactly those the rule allows, and the weights a folded net saves are
// the unfolded ones.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "net/memory_plan.hpp"

namespace crema {
namespace {

void FillUniform(Blob* blob, std::mt19937* rng, double low, double high) {
  std::uniform_real_distribution<double> uniform(low, high);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) x[i] = static_cast<float>(uniform(*rng));
}

// Random weights with non-trivial BatchNorm statistics: the moving-average factor s is 0.5, so
// the stored mean and variance are s times the ones used; variances are positive.
void RandomWeights(Net* net, unsigned seed) {
  std::mt19937 rng(seed);
  for (int l = 0; l < net->num_layers(); ++l) {
    Layer& layer = *net->layers()[l];
    const std::string type = layer.type();
    auto& blobs = layer.blobs();
    if (type == "BatchNorm") {
      const double s = 0.5;
      FillUniform(blobs[0].get(), &rng, -0.5 * s, 0.5 * s);
      FillUniform(blobs[1].get(), &rng, 0.2 * s, 2.0 * s);
      blobs[2]->mutable_cpu_data<float>()[0] = static_cast<float>(s);
    } else if (type == "Scale") {
      FillUniform(blobs[0].get(), &rng, 0.5, 1.5);
      if (blobs.size() > 1) FillUniform(blobs[1].get(), &rng, -0.2, 0.2);
    } else if (!blobs.empty()) {
      // Roughly variance-preserving weights, small biases.
      const double fan_in = static_cast<double>(blobs[0]->count()) / blobs[0]->shape(0);
      const double bound = std::sqrt(3.0 / fan_in);
      FillUniform(blobs[0].get(), &rng, -bound, bound);
      for (size_t j = 1; j < blobs.size(); ++j) FillUniform(blobs[j].get(), &rng, -0.1, 0.1);
    }
  }
}

std::unique_ptr<Net> Build(const NetParameter& param, Phase phase, bool fold,
                           MemoryPlan plan = MemoryPlan::kOff,
                           const std::vector<std::string>& keep = {}) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(phase);
  options.verbose = false;
  options.memory_plan = plan;
  options.keep_blobs = keep;
  options.fold_batch_norm = fold;
  // (Depthwise fusion keeps some tops apart in the plan, more memory: fuse_depthwise_test.)
  options.fuse_depthwise = false;
  return std::make_unique<Net>(param, options);
}

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

void FillInputs(Net* net, unsigned seed) {
  std::mt19937 rng(seed);
  for (Blob* input : net->input_blobs()) FillUniform(input, &rng, -1.0, 1.0);
}

// max |a - b| / max |a| over the blob.
double RelativeDifference(const Blob& a, const Blob& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.count(); ++i) {
    diff = std::max(diff, std::abs(a.data_at(i) - b.data_at(i)));
    scale = std::max(scale, std::abs(a.data_at(i)));
  }
  EXPECT_GT(scale, 0.0);
  return diff / scale;
}

std::vector<std::string> Folded(const Net& net) {
  std::vector<std::string> names;
  for (int l = 0; l < net.num_layers(); ++l)
    if (net.folded_into()[l] >= 0)
      names.push_back(net.layer_names()[l] + ">" + net.layer_names()[net.folded_into()[l]]);
  return names;
}

struct ZooCase {
  std::string path;
  std::string logits;  // the blob before the softmax
};

class ZooFold : public testing::TestWithParam<ZooCase> {};

TEST_P(ZooFold, FoldedOutputsEqualUnfolded) {
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + GetParam().path, &param);
  auto plain = Build(param, TEST, false);
  auto folded = Build(param, TEST, true, MemoryPlan::kInference, {GetParam().logits});
  RandomWeights(plain.get(), 7);
  folded->ShareTrainedLayersWith(*plain);
  int batch_norms = 0, scales = 0, folded_bn = 0, folded_scale = 0;
  for (int l = 0; l < plain->num_layers(); ++l) {
    const std::string type = plain->layers()[l]->type();
    batch_norms += type == "BatchNorm";
    scales += type == "Scale";
    folded_bn += type == "BatchNorm" && folded->folded_into()[l] >= 0;
    folded_scale += type == "Scale" && folded->folded_into()[l] >= 0;
  }
  EXPECT_GT(batch_norms, 0);
  EXPECT_EQ(folded_bn, batch_norms);  // every BatchNorm follows a convolution in these nets
  EXPECT_EQ(folded_scale, scales);
  // The folded layers take no activation memory: the plan is smaller than without folding.
  auto unfolded_plan = Build(param, TEST, false);
  EXPECT_LE(PlanNetMemory(*folded, MemoryPlan::kInference, {}).after(),
            PlanNetMemory(*unfolded_plan, MemoryPlan::kInference, {}).after());

  FillInputs(plain.get(), 11);
  FillInputs(folded.get(), 11);
  plain->Forward();
  folded->Forward();
  const double logits_diff = RelativeDifference(*plain->blob_by_name(GetParam().logits),
                                                *folded->blob_by_name(GetParam().logits));
  EXPECT_LT(logits_diff, 1e-5);
  std::printf("%s: folded vs unfolded logits, max relative difference %.3g\n",
              GetParam().path.c_str(), logits_diff);
  EXPECT_LT(RelativeDifference(*plain->output_blobs()[0], *folded->output_blobs()[0]), 1e-5);
  // The unfolded weights are untouched.
  NetParameter saved_plain, saved_folded;
  plain->ToProto(&saved_plain);
  folded->ToProto(&saved_folded);
  ASSERT_EQ(saved_plain.layer_size(), saved_folded.layer_size());
  for (int l = 0; l < saved_plain.layer_size(); ++l)
    EXPECT_EQ(saved_plain.layer(l).SerializeAsString(), saved_folded.layer(l).SerializeAsString())
        << saved_plain.layer(l).name();
}

INSTANTIATE_TEST_SUITE_P(Models, ZooFold,
                         testing::Values(ZooCase{"resnet50/deploy.prototxt", "fc1000"},
                                         ZooCase{"mobilenet_v2/deploy.prototxt", "fc7"}),
                         [](const testing::TestParamInfo<ZooCase>& info) {
                           return info.param.path.substr(0, info.param.path.find('/'));
                         });

// conv (no bias) -> BatchNorm -> Scale, each with a top of its own, then a ReLU; `extra` adds
// layers at the end.
std::string SmallNet(const std::string& bn_param, const std::string& extra = "") {
  return R"(
    name: "small"
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 3 dim: 6 dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "bn" )" +
         bn_param + R"( }
    layer { name: "scale" type: "Scale" bottom: "bn" top: "scale"
            scale_param { bias_term: true } }
    layer { name: "relu" type: "ReLU" bottom: "scale" top: "out" }
  )" + extra;
}

// Forwards both nets on the same input and weights and compares their outputs.
void ExpectSameOutputs(Net* plain, Net* folded, unsigned seed) {
  RandomWeights(plain, seed);
  folded->ShareTrainedLayersWith(*plain);
  FillInputs(plain, seed + 1);
  FillInputs(folded, seed + 1);
  plain->Forward();
  folded->Forward();
  ASSERT_EQ(plain->output_blobs().size(), folded->output_blobs().size());
  for (size_t j = 0; j < plain->output_blobs().size(); ++j)
    EXPECT_LT(RelativeDifference(*plain->output_blobs()[j], *folded->output_blobs()[j]), 1e-6)
        << "output " << j;
}

TEST(FoldBatchNorm, ConvWithoutBiasGetsOneAndTopsAlias) {
  const NetParameter param = Parse(SmallNet("batch_norm_param { use_global_stats: true }"));
  for (MemoryPlan plan : {MemoryPlan::kOff, MemoryPlan::kInference}) {
    auto plain = Build(param, TRAIN, false);
    auto folded = Build(param, TRAIN, true, plan);
    EXPECT_EQ(Folded(*folded), (std::vector<std::string>{"bn>conv", "scale>conv"}));
    ExpectSameOutputs(plain.get(), folded.get(), 3);
    // No memory of their own: the BatchNorm and Scale tops are the convolution's.
    EXPECT_EQ(folded->blob_by_name("bn")->data(), folded->blob_by_name("conv")->data());
    EXPECT_EQ(folded->blob_by_name("scale")->data(), folded->blob_by_name("conv")->data());
    // The convolution still has one blob, and saves it unfolded.
    NetParameter saved;
    folded->ToProto(&saved);
    ASSERT_EQ(saved.layer(1).blobs_size(), 1);
    Blob weight;
    weight.FromProto(saved.layer(1).blobs(0));
    const Blob& original = *plain->layer_by_name("conv")->blobs()[0];
    for (int64_t i = 0; i < original.count(); ++i)
      ASSERT_EQ(weight.data_at(i), original.data_at(i));
    EXPECT_THROW(folded->Backward(), RuntimeError);
  }
}

TEST(FoldBatchNorm, RefoldsAfterNewWeightsAndUnfolds) {
  const NetParameter param = Parse(SmallNet("batch_norm_param { use_global_stats: true }"));
  auto plain = Build(param, TEST, false);
  auto folded = Build(param, TEST, true, MemoryPlan::kInference);
  ExpectSameOutputs(plain.get(), folded.get(), 5);
  // New weights through a .caffemodel-style NetParameter: the next Forward folds them.
  RandomWeights(plain.get(), 9);
  NetParameter weights;
  plain->ToProto(&weights);
  folded->CopyTrainedLayersFrom(weights);
  plain->Forward();
  folded->Forward();
  EXPECT_LT(RelativeDifference(*plain->output_blobs()[0], *folded->output_blobs()[0]), 1e-6);
  // Unfolding runs the layers as written again.
  folded->SetFoldBatchNorm(false);
  EXPECT_TRUE(Folded(*folded).empty());
  folded->Forward();
  EXPECT_EQ(RelativeDifference(*plain->output_blobs()[0], *folded->output_blobs()[0]), 0.0);
}

TEST(FoldBatchNorm, BatchStatisticsAreNotFolded) {
  // TRAIN without use_global_stats: batch statistics.
  const NetParameter defaults = Parse(SmallNet(""));
  EXPECT_TRUE(Folded(*Build(defaults, TRAIN, true)).empty());
  // TEST uses the global statistics by default (Caffe's rule).
  EXPECT_EQ(Folded(*Build(defaults, TEST, true)).size(), 2u);
  const NetParameter batch = Parse(SmallNet("batch_norm_param { use_global_stats: false }"));
  EXPECT_TRUE(Folded(*Build(batch, TEST, true)).empty());
}

TEST(FoldBatchNorm, SharedValuesAreNotFolded) {
  // The convolution's output read by the BatchNorm and another layer: nothing folds.
  const NetParameter conv_shared =
      Parse(SmallNet("batch_norm_param { use_global_stats: true }",
                     R"(layer { name: "other" type: "ReLU" bottom: "conv" top: "other" })"));
  EXPECT_TRUE(Folded(*Build(conv_shared, TEST, true)).empty());
  // The BatchNorm's output read by the Scale and another layer: the BatchNorm folds (the
  // convolution's output becomes its value), the Scale does not.
  const NetParameter bn_shared =
      Parse(SmallNet("batch_norm_param { use_global_stats: true }",
                     R"(layer { name: "other" type: "ReLU" bottom: "bn" top: "other" })"));
  auto plain = Build(bn_shared, TEST, false);
  auto folded = Build(bn_shared, TEST, true, MemoryPlan::kInference);
  EXPECT_EQ(Folded(*folded), (std::vector<std::string>{"bn>conv"}));
  ExpectSameOutputs(plain.get(), folded.get(), 13);
  // A kept BatchNorm output keeps its value: the Scale is not folded into it.
  auto kept = Build(Parse(SmallNet("batch_norm_param { use_global_stats: true }")), TEST, true,
                    MemoryPlan::kInference, {"bn"});
  EXPECT_EQ(Folded(*kept), (std::vector<std::string>{"bn>conv"}));
}

TEST(FoldBatchNorm, InPlaceChainFolds) {
  const NetParameter param = Parse(R"(
    name: "inplace"
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 1 dim: 2 dim: 5 dim: 5 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 3 kernel_size: 1 group: 1 } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
    layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: false } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer { name: "conv2" type: "Convolution" bottom: "conv" top: "conv2"
            convolution_param { num_output: 3 kernel_size: 3 group: 3 } }
    layer { name: "bn2" type: "BatchNorm" bottom: "conv2" top: "conv2" }
  )");
  auto plain = Build(param, TEST, false);
  auto folded = Build(param, TEST, true, MemoryPlan::kInference);
  EXPECT_EQ(Folded(*folded), (std::vector<std::string>{"bn>conv", "scale>conv", "bn2>conv2"}));
  ExpectSameOutputs(plain.get(), folded.get(), 17);
}

}  // namespace
}  // namespace crema
