// The activation memory planner (src/net/memory_plan.cpp): arena offsets and byte counts on small
// nets computed by hand, that blobs live at the same step never share bytes (every zoo net, both
// plans), what a user reads (outputs, kept blobs), re-planning after a Reshape, and the refusal
// of Backward under an inference plan.
#include "net/memory_plan.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"

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
  // place at 6), ip2 7-8. From the largest down, each at the lowest offset free of the blobs
  // live with it: conv1 at 0, pool1 after it (both live at 2), conv2 at 0 (conv1 is dead), pool2
  // after conv2, ip1 at 0, ip2 after ip1. data and prob keep their own memory.
  EXPECT_EQ(layout.arena_bytes, kConv1 + kPool1);
  EXPECT_EQ(layout.kept_data, kData + kProb);
  EXPECT_EQ(layout.diff_before, 0u);
  EXPECT_EQ(layout.kept_diff, 0u);
  const auto offset_of = [&](const std::string& name) {
    const auto& names = net->blob_names();
    return layout.blobs[std::find(names.begin(), names.end(), name) - names.begin()].data_offset;
  };
  EXPECT_EQ(offset_of("data"), -1);
  EXPECT_EQ(offset_of("prob"), -1);
  EXPECT_EQ(offset_of("conv1"), 0);
  EXPECT_EQ(offset_of("pool1"), static_cast<int64_t>(kConv1));
  EXPECT_EQ(offset_of("conv2"), 0);
  EXPECT_EQ(offset_of("pool2"), static_cast<int64_t>(kConv2));
  EXPECT_EQ(offset_of("ip1"), 0);
  EXPECT_EQ(offset_of("ip2"), static_cast<int64_t>(kIp1));
  // Kept blobs keep their own memory.
  const MemoryPlanLayout kept = PlanNetMemory(*net, MemoryPlan::kInference, {"conv1"});
  EXPECT_EQ(kept.blobs[1].data_offset, -1);
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
  EXPECT_EQ(layout.kept_data, data + label + loss);
  // Gradients: conv1..ip, and the loss weight in the loss diff; none for data or label.
  EXPECT_EQ(layout.diff_before, conv1 + conv2 + conv3 + ip + loss);
  EXPECT_EQ(layout.kept_diff, loss);
  // Steps: data conv1 1-10, conv2 2-9, conv3 3-8, ip 4-7; gradients (backward steps 11 - layer)
  // ip 6-7, conv3 7-8, conv2 8-9, conv1 9-10. The arena is the live peak, at step 9: the data
  // and gradients of conv1 and conv2 (sizes rounded up to 256 bytes).
  const auto up = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  EXPECT_EQ(layout.arena_bytes, 2 * up(conv1) + 2 * up(conv2));
  // Inference: everything but the inputs and the loss shares; no gradients but the loss's.
  const MemoryPlanLayout inference = PlanNetMemory(*net, MemoryPlan::kInference, {});
  EXPECT_EQ(inference.diff_before, loss);
  // conv1 1-2, conv2 2-3, conv3 3-4, ip 4-5: conv3 over conv1's bytes, ip over conv2's.
  EXPECT_EQ(inference.kept_data, data + label + loss);
  EXPECT_EQ(inference.arena_bytes, up(conv1) + up(conv2));
}

void FillRandom(Blob* blob, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  float* x = blob->mutable_cpu_data<float>();
  for (int64_t i = 0; i < blob->count(); ++i) x[i] = uniform(rng);
}

// Where a blob's values are (planned blobs share bytes of the arena through views of their own).
const void* Bytes(const Net& net, const char* name) {
  return net.blob_by_name(name)->data()->cpu_data();
}

TEST(MemoryPlan, PlannedNetSharesBuffersAndKeepsOutputs) {
  auto plain = Build(kLeNet);
  auto planned = Build(kLeNet, MemoryPlan::kInference, {"pool2"});
  planned->ShareTrainedLayersWith(*plain);
  const Net* nets[] = {plain.get(), planned.get()};
  for (const Net* net : nets) FillRandom(net->input_blobs()[0], 7);
  plain->Forward();
  planned->Forward();
  EXPECT_EQ(Bytes(*planned, "conv1"), Bytes(*planned, "conv2"));
  EXPECT_NE(Bytes(*plain, "conv1"), Bytes(*plain, "conv2"));
  for (const std::string name : {"prob", "pool2"}) {
    const Blob& a = *plain->blob_by_name(name);
    const Blob& b = *planned->blob_by_name(name);
    for (int64_t i = 0; i < a.count(); ++i) ASSERT_EQ(a.data_at(i), b.data_at(i)) << name << i;
  }
  EXPECT_THROW(planned->Backward(), RuntimeError);
  EXPECT_THROW(planned->SetMemoryPlan(MemoryPlan::kInference, {"nope"}), ConfigError);
  // Off again: every blob its own memory.
  planned->SetMemoryPlan(MemoryPlan::kOff);
  EXPECT_NE(Bytes(*planned, "conv1"), Bytes(*planned, "conv2"));
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
    EXPECT_EQ(Bytes(*planned, "conv1"), Bytes(*planned, "ip1"));
  }
}

// Planned blobs live at the same step never share a byte, in every zoo net's TRAIN and TEST nets
// under both plans; the arena is no smaller than the bytes live at any one step.
TEST(MemoryPlan, BlobsLiveTogetherNeverShareBytes) {
  const std::vector<std::pair<std::string, Phase>> nets = {
      {"resnet50/deploy.prototxt", TEST},     {"bvlc_googlenet/deploy.prototxt", TEST},
      {"mobilenet_v2/deploy.prototxt", TEST}, {"squeezenet_v1.1/deploy.prototxt", TEST},
      {"lenet/lenet.prototxt", TEST},         {"cifar10_quick/deploy.prototxt", TEST}};
  for (const auto& [model, phase] : nets) {
    NetParameter param;
    ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + model, &param);
    NetOptions options;
    options.override_state = true;
    options.state.set_phase(phase);
    options.verbose = false;
    // force_backward: every blob has a gradient, so the training plan places diffs too.
    param.set_force_backward(true);
    Net net(param, options);
    for (MemoryPlan mode : {MemoryPlan::kInference, MemoryPlan::kTraining}) {
      SCOPED_TRACE(model + (mode == MemoryPlan::kTraining ? " training" : " inference"));
      const MemoryPlanLayout layout = PlanNetMemory(net, mode, {});
      std::vector<const MemoryPlanLayout::Group*> groups;
      for (const auto* kind : {&layout.data_groups, &layout.diff_groups})
        for (const MemoryPlanLayout::Group& g : *kind)
          if (g.planned) groups.push_back(&g);
      ASSERT_FALSE(groups.empty());
      int last_step = 0;
      for (const auto* g : groups) {
        ASSERT_GE(g->offset, 0);
        EXPECT_EQ(g->offset % 256, 0);
        EXPECT_LE(static_cast<size_t>(g->offset) + g->bytes, layout.arena_bytes);
        last_step = std::max(last_step, g->last);
      }
      for (size_t i = 0; i < groups.size(); ++i)
        for (size_t j = i + 1; j < groups.size(); ++j) {
          const auto *a = groups[i], *b = groups[j];
          if (a->first > b->last || b->first > a->last) continue;  // never live together
          if (a->nested || b->nested) continue;  // a Concat bottom inside its top, by design
          const bool apart =
              static_cast<size_t>(a->offset) + a->bytes <= static_cast<size_t>(b->offset) ||
              static_cast<size_t>(b->offset) + b->bytes <= static_cast<size_t>(a->offset);
          EXPECT_TRUE(apart) << "groups " << i << " and " << j << " overlap in time and bytes";
        }
      for (int step = 0; step <= last_step; ++step) {
        size_t live = 0;
        for (const auto* g : groups)
          live += !g->nested && g->first <= step && step <= g->last ? g->bytes : 0;
        EXPECT_LE(live, layout.arena_bytes) << "step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace crema
