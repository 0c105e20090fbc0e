// The activation memory planner (src/net/memory_plan.cpp): byte counts and buffer sharing on
// small nets computed by hand, what a user reads (outputs, kept blobs), re-planning after a
// Reshape, and the refusal of Backward under an inference plan.
#include "net/memory_plan.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "crema/net.hpp"

namespace crema {
namespace {

std::unique_ptr<Net> Build(const std::string& text, MemoryPlan plan = MemoryPlan::kOff,
                           std::vector<std::string> keep = {}) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TRAIN);
  options.verbose = false;
  options.memory_plan = plan;
  options.keep_blobs = std::move(keep);
  return std::make_unique<Net>(param, options);
}

// LeNet's deploy shapes at batch 64.
const char* kLeNet = R"(
  name: "lenet"
  layer { name: "data" type: "Input" top: "data"
          input_param { shape { dim: 64 dim: 1 dim: 28 dim: 28 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 20 kernel_size: 5 weight_filler { type: "xavier" } } }
  layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
          convolution_param { num_output: 50 kernel_size: 5 weight_filler { type: "xavier" } } }
  layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
          pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
          inner_product_param { num_output: 500 weight_filler { type: "xavier" } } }
  layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
  layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
          inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }
)";

constexpr size_t kFloat = 4;
constexpr size_t kData = 64 * 1 * 28 * 28 * kFloat;    // 200704
constexpr size_t kConv1 = 64 * 20 * 24 * 24 * kFloat;  // 2949120
constexpr size_t kPool1 = 64 * 20 * 12 * 12 * kFloat;  // 737280
constexpr size_t kConv2 = 64 * 50 * 8 * 8 * kFloat;    // 819200
constexpr size_t kPool2 = 64 * 50 * 4 * 4 * kFloat;    // 204800
constexpr size_t kIp1 = 64 * 500 * kFloat;             // 128000
constexpr size_t kIp2 = 64 * 10 * kFloat;              // 2560
constexpr size_t kProb = 64 * 10 * kFloat;             // 2560

TEST(MemoryPlan, LeNetInferenceBytesByHand) {
  auto net = Build(kLeNet);
  const MemoryPlanLayout layout = PlanNetMemory(*net, MemoryPlan::kInference, {});
  EXPECT_EQ(layout.data_before, kData + kConv1 + kPool1 + kConv2 + kPool2 + kIp1 + kIp2 + kProb);
  // Lifetimes (layer steps): conv1 1-2, pool1 2-3, conv2 3-4, pool2 4-5, ip1 5-7 (relu1 in
  // place at 6), ip2 7-8. Two buffers alternate: conv1, conv2, ip1 in one (largest conv1),
  // pool1, pool2, ip2 in the other (largest pool1). data and prob keep their own.
  ASSERT_EQ(layout.data_buffers.size(), 2u);
  EXPECT_EQ(layout.data_buffers[0], kConv1);
  EXPECT_EQ(layout.data_buffers[1], kPool1);
  EXPECT_EQ(layout.data_after, kData + kProb + kConv1 + kPool1);
  EXPECT_EQ(layout.diff_before, 0u);
  EXPECT_EQ(layout.diff_after, 0u);
  const auto buffer_of = [&](const std::string& name) {
    const auto& names = net->blob_names();
    return layout.blobs[std::find(names.begin(), names.end(), name) - names.begin()].data_buffer;
  };
  EXPECT_EQ(buffer_of("data"), -1);
  EXPECT_EQ(buffer_of("prob"), -1);
  EXPECT_EQ(buffer_of("conv1"), buffer_of("conv2"));
  EXPECT_EQ(buffer_of("conv1"), buffer_of("ip1"));
  EXPECT_EQ(buffer_of("pool1"), buffer_of("pool2"));
  EXPECT_EQ(buffer_of("pool1"), buffer_of("ip2"));
  EXPECT_NE(buffer_of("conv1"), buffer_of("pool1"));
  // Kept blobs keep their own memory.
  const MemoryPlanLayout kept = PlanNetMemory(*net, MemoryPlan::kInference, {"conv1"});
  EXPECT_EQ(kept.blobs[1].data_buffer, -1);
  EXPECT_EQ(kept.blobs[1].data_note, "kept");
}

// A chain of three convolutions and a loss, at (2,3,8,8): the gradients of conv1..ip share two
// buffers in training; the data stays live for backward.
const char* kChain = R"(
  name: "chain"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 } } }
  layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
          convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
  layer { name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
          convolution_param { num_output: 5 kernel_size: 3 weight_filler { type: "xavier" } } }
  layer { name: "conv3" type: "Convolution" bottom: "conv2" top: "conv3"
          convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: "xavier" } } }
  layer { name: "ip" type: "InnerProduct" bottom: "conv3" top: "ip"
          inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

TEST(MemoryPlan, ChainTrainingBytesByHand) {
  auto net = Build(kChain);
  constexpr size_t data = 2 * 3 * 8 * 8 * kFloat, label = 2 * kFloat;
  constexpr size_t conv1 = 2 * 4 * 8 * 8 * kFloat;  // 2048
  constexpr size_t conv2 = 2 * 5 * 6 * 6 * kFloat;  // 1440
  constexpr size_t conv3 = 2 * 6 * 4 * 4 * kFloat;  // 768
  constexpr size_t ip = 2 * 3 * kFloat, loss = 1 * kFloat;
  const MemoryPlanLayout layout = PlanNetMemory(*net, MemoryPlan::kTraining, {});
  const size_t all_data = data + label + conv1 + conv2 + conv3 + ip + loss;
  EXPECT_EQ(layout.data_before, all_data);
  // Every activation is read by a backward that runs after the forward of every later layer.
  EXPECT_EQ(layout.data_after, all_data);
  // Gradients: conv1..ip, and the loss weight in the loss diff; none for data or label.
  EXPECT_EQ(layout.diff_before, conv1 + conv2 + conv3 + ip + loss);
  // Backward steps (11 - layer): ip 6-7, conv3 7-8, conv2 8-9, conv1 9-10: ip and conv2
  // alternate with conv3 and conv1.
  ASSERT_EQ(layout.diff_buffers.size(), 2u);
  EXPECT_EQ(layout.diff_buffers[0], conv2);
  EXPECT_EQ(layout.diff_buffers[1], conv1);
  EXPECT_EQ(layout.diff_after, loss + conv2 + conv1);
  // Inference: everything but the inputs and the loss shares; no gradients but the loss's.
  const MemoryPlanLayout inference = PlanNetMemory(*net, MemoryPlan::kInference, {});
  EXPECT_EQ(inference.diff_before, loss);
  // conv1 1-2, conv2 2-3, conv3 3-4, ip 4-5: conv1, conv3 in one buffer; conv2, ip in another.
  EXPECT_EQ(inference.data_after, data + label + loss + conv1 + conv2);
}

void FillRandom(Blob* blob, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) x[i] = uniform(rng);
}

TEST(MemoryPlan, PlannedNetSharesBuffersAndKeepsOutputs) {
  auto plain = Build(kLeNet);
  auto planned = Build(kLeNet, MemoryPlan::kInference, {"pool2"});
  planned->ShareTrainedLayersWith(*plain);
  const Net* nets[] = {plain.get(), planned.get()};
  for (const Net* net : nets) FillRandom(net->input_blobs()[0], 7);
  plain->Forward();
  planned->Forward();
  EXPECT_EQ(planned->blob_by_name("conv1")->data(), planned->blob_by_name("conv2")->data());
  EXPECT_NE(plain->blob_by_name("conv1")->data(), plain->blob_by_name("conv2")->data());
  for (const std::string name : {"prob", "pool2"}) {
    const Blob& a = *plain->blob_by_name(name);
    const Blob& b = *planned->blob_by_name(name);
    for (int64_t i = 0; i < a.count(); ++i) ASSERT_EQ(a.data_at(i), b.data_at(i)) << name << i;
  }
  EXPECT_THROW(planned->Backward(), RuntimeError);
  EXPECT_THROW(planned->SetMemoryPlan(MemoryPlan::kInference, {"nope"}), ConfigError);
  // Off again: every blob its own memory.
  planned->SetMemoryPlan(MemoryPlan::kOff);
  EXPECT_NE(planned->blob_by_name("conv1")->data(), planned->blob_by_name("conv2")->data());
}

TEST(MemoryPlan, ReplansWhenTheInputGrows) {
  auto plain = Build(kLeNet);
  auto planned = Build(kLeNet, MemoryPlan::kInference);
  planned->ShareTrainedLayersWith(*plain);
  for (int batch : {64, 100, 3}) {
    for (Net* net : {plain.get(), planned.get()}) {
      net->input_blobs()[0]->Reshape(batch, 1, 28, 28);
      FillRandom(net->input_blobs()[0], batch);
      net->Reshape();
      net->Forward();
      net->Forward();
    }
    const Blob& a = *plain->output_blobs()[0];
    const Blob& b = *planned->output_blobs()[0];
    ASSERT_EQ(a.count(), batch * 10);
    for (int64_t i = 0; i < a.count(); ++i) ASSERT_EQ(a.data_at(i), b.data_at(i));
    EXPECT_EQ(planned->blob_by_name("conv1")->data(), planned->blob_by_name("ip1")->data());
  }
}

}  // namespace
}  // namespace crema
