// GradientReducer (solvers/distributed.hpp) in a world of one (RANK=0 WORLD_SIZE=1): its bucket
// plan (the order in which backward completes the gradients, a shared parameter with its first
// user, the size limit), and that reducing the buckets during backward (overlap) or after it
// leaves every gradient as plain backward computed it — on the CPU (the TCP transport) and, with
// a GPU and NCCL, through ncclAllReduce on its own stream. Two ranks: tcp_train_test.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "crema/blob.hpp"
#include "crema/net.hpp"
#include "solvers/distributed.hpp"

namespace crema {
namespace {

// ip1 and ip2 share the weight "w"; ip3's weights are its own.
constexpr const char* kNet = R"(name: "shared"
layer { name: "x" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 4 dim: 5 } shape { dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h1" param { name: "w" }
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "relu" type: "ReLU" bottom: "h1" top: "h1" }
layer { name: "ip2" type: "InnerProduct" bottom: "h1" top: "h2" param { name: "w" }
        inner_product_param { num_output: 5 bias_term: false } }
layer { name: "ip3" type: "InnerProduct" bottom: "h2" top: "s"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 }
                              bias_filler { type: "constant" value: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";

std::unique_ptr<Net> MakeNet(const Device& device) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kNet, &param));
  param.mutable_state()->set_phase(TRAIN);
  NetOptions options;
  options.device = device;
  auto net = std::make_unique<Net>(param, options);
  float* x = net->input_blobs()[0]->mutable_cpu_data<float>();
  for (int i = 0; i < 20; ++i) x[i] = static_cast<float>((i * 7) % 11) / 5.0f - 1.0f;
  float* label = net->input_blobs()[1]->mutable_cpu_data<float>();
  for (int i = 0; i < 4; ++i) label[i] = static_cast<float>(i % 3);
  return net;
}

std::vector<std::vector<float>> Diffs(const Net& net) {
  std::vector<std::vector<float>> diffs;
  for (Blob* blob : net.learnable_params()) {
    const float* diff = blob->cpu_diff<float>();
    diffs.emplace_back(diff, diff + blob->count());
  }
  return diffs;
}

// One iteration's gradients, reduced as Solver::Step does (layer by layer with overlap).
std::vector<std::vector<float>> Reduced(Net* net, dist::GradientReducer* reducer) {
  net->ClearParamDiffs();
  net->Forward();
  for (int layer = net->num_layers() - 1; layer >= 0; --layer) {
    net->BackwardFromTo(layer, layer);
    reducer->LayerDone(layer);
  }
  reducer->Finish();
  return Diffs(*net);
}

class GradientReducerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    dist::Init();
  }
  static void TearDownTestSuite() { dist::Finalize(); }

  void ExpectUnchanged(const Device& device) {
    auto net = MakeNet(device);
    net->ClearParamDiffs();
    net->ForwardBackward();
    const auto plain = Diffs(*net);
    double total = 0;
    for (const auto& diff : plain)
      for (float v : diff) total += std::abs(v);
    ASSERT_GT(total, 1e-3);  // gradients that can differ
    for (bool overlap : {false, true}) {
      dist::GradientReducer reducer(*net, 64, overlap);
      for (int iteration = 0; iteration < 2; ++iteration)
        EXPECT_EQ(Reduced(net.get(), &reducer), plain) << overlap << " " << iteration;
    }
  }
};

TEST_F(GradientReducerTest, BucketsFollowBackwardAndTheSizeLimit) {
  auto net = MakeNet(Device::Cpu());
  // learnable_params: w (25 floats), ip1 bias (5), ip3 weight (15), ip3 bias (3).
  const auto& learnable = net->learnable_params();
  ASSERT_EQ(learnable.size(), 4u);
  const int ip1 = net->layer_index("ip1"), ip3 = net->layer_index("ip3");
  dist::GradientReducer big(*net, 1 << 20, true);
  EXPECT_EQ(big.num_buckets(), 1u);
  EXPECT_EQ(big.bucket(0),
            (std::vector<Blob*>{learnable[2], learnable[3], learnable[0], learnable[1]}));
  EXPECT_EQ(big.bucket_ready_layer(0), ip1);
  // 72 bytes: {ip3 weight 60, ip3 bias 12}, {w 100} (complete after ip1, its first user, not
  // after ip2), {ip1 bias 20}.
  dist::GradientReducer small(*net, 72, true);
  ASSERT_EQ(small.num_buckets(), 3u);
  EXPECT_EQ(small.bucket(0), (std::vector<Blob*>{learnable[2], learnable[3]}));
  EXPECT_EQ(small.bucket_ready_layer(0), ip3);
  EXPECT_EQ(small.bucket(1), (std::vector<Blob*>{learnable[0]}));
  EXPECT_EQ(small.bucket_ready_layer(1), ip1);
  EXPECT_EQ(small.bucket(2), (std::vector<Blob*>{learnable[1]}));
  EXPECT_EQ(small.bucket_ready_layer(2), ip1);
}

TEST_F(GradientReducerTest, ReducingLeavesTheGradientsOfOneRankAsTheyAre) {
  ExpectUnchanged(Device::Cpu());
}

TEST_F(GradientReducerTest, NcclOnTheGpu) {
#ifndef CREMA_WITH_NCCL
  GTEST_SKIP() << "crema was built without NCCL";
#endif
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  SetCudaDevice(0);
  auto net = MakeNet(Device::Cuda(0));
  dist::GradientReducer reducer(*net, 64, true);
  EXPECT_STREQ(reducer.transport_name(), "NCCL");
  EXPECT_TRUE(reducer.overlap());
  ExpectUnchanged(Device::Cuda(0));
}

}  // namespace
}  // namespace crema
