// Inference scratch: the net's shared Workspace, layers set forward-only by an inference plan
// (they refuse Backward), and layers run in place by the inference plan with bit-identical
// outputs.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <random>

#include "core/workspace.hpp"
#include "crema/net.hpp"
#include "net/memory_plan.hpp"

namespace crema {
namespace {

TEST(Workspace, GrowsToTheLargestRequestAndKeepsIt) {
  Workspace workspace;
  EXPECT_EQ(workspace.Cpu(0), nullptr);
  float* a = workspace.Cpu<float>(100);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(workspace.bytes(), 400u);
  for (int i = 0; i < 100; ++i) a[i] = static_cast<float>(i);
  EXPECT_EQ(workspace.Cpu<float>(50), a);  // smaller: the same memory
  EXPECT_EQ(workspace.bytes(), 400u);
  double* b = workspace.Cpu<double>(1000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(workspace.bytes(), 8000u);
  b[999] = 1.5;  // all of it is usable
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
}

// Input -> conv (3x3) -> relu (own top) -> sigmoid (own top) -> conv -> pool; `extra` adds a
// second consumer of the relu's top.
NetParameter ChainNet(bool extra) {
  std::string text = R"(
    name: "chain"
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
    layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
            convolution_param { num_output: 4 kernel_size: 3 pad: 1
                                weight_filler { type: "gaussian" std: 0.5 }
                                bias_filler { type: "uniform" min: -0.5 max: 0.5 } } }
    layer { name: "relu" type: "ReLU" bottom: "conv1" top: "r" }
    layer { name: "sig" type: "Sigmoid" bottom: "r" top: "s" }
    layer { name: "conv2" type: "Convolution" bottom: "s" top: "conv2"
            convolution_param { num_output: 4 kernel_size: 3
                                weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "pool" type: "Pooling" bottom: "conv2" top: "pool"
            pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  )";
  if (extra)
    text += R"(layer { name: "pool_r" type: "Pooling" bottom: "r" top: "pool_r"
                       pooling_param { pool: AVE kernel_size: 3 stride: 3 } })";
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::unique_ptr<Net> Build(const NetParameter& param, MemoryPlan plan, bool in_place = true,
                           const std::vector<std::string>& keep = {}) {
  NetOptions options;
  options.verbose = false;
  options.memory_plan = plan;
  options.memory_plan_in_place = in_place;
  options.keep_blobs = keep;
  return std::make_unique<Net>(param, options);
}

std::vector<std::string> InPlaceNames(const Net& net, const MemoryPlanLayout& layout) {
  std::vector<std::string> names;
  for (int l : layout.in_place_layers) names.push_back(net.layer_names()[l]);
  return names;
}

// Forwards both nets on the same random input; every output must be bit-identical.
void ExpectSameOutputs(Net* plain, Net* planned) {
  planned->ShareTrainedLayersWith(*plain);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Blob* a = plain->input_blobs()[0];
  Blob* b = planned->input_blobs()[0];
  for (int64_t i = 0; i < a->count(); ++i)
    a->mutable_cpu_data<float>()[i] = b->mutable_cpu_data<float>()[i] = uniform(rng);
  plain->Forward();
  planned->Forward();
  ASSERT_EQ(plain->output_blobs().size(), planned->output_blobs().size());
  for (size_t j = 0; j < plain->output_blobs().size(); ++j) {
    const Blob& x = *plain->output_blobs()[j];
    const Blob& y = *planned->output_blobs()[j];
    ASSERT_EQ(x.count(), y.count());
    double magnitude = 0;
    for (int64_t i = 0; i < x.count(); ++i) {
      ASSERT_EQ(x.cpu_data<float>()[i], y.cpu_data<float>()[i]) << "output " << j << " at " << i;
      magnitude += std::abs(x.cpu_data<float>()[i]);
    }
    EXPECT_GT(magnitude, 0);  // not trivially equal
  }
}

TEST(InPlaceInference, ActivationsWithOneConsumerRunInPlace) {
  auto plain = Build(ChainNet(false), MemoryPlan::kOff);
  const MemoryPlanLayout layout = PlanNetMemory(*plain, MemoryPlan::kInference, {});
  EXPECT_EQ(InPlaceNames(*plain, layout), (std::vector<std::string>{"relu", "sig"}));
  // conv1, r and s share their bytes; conv2 needs bytes of its own while s is read; pool is the
  // output.
  const auto& blobs = layout.blobs;
  const auto id = [&](const char* name) {
    for (size_t b = 0; b < plain->blob_names().size(); ++b)
      if (plain->blob_names()[b] == name) return b;
    return size_t{0};
  };
  EXPECT_EQ(blobs[id("r")].data_offset, blobs[id("conv1")].data_offset);
  EXPECT_EQ(blobs[id("s")].data_offset, blobs[id("conv1")].data_offset);
  EXPECT_NE(blobs[id("conv2")].data_offset, blobs[id("conv1")].data_offset);
  const size_t bytes = 2 * 4 * 9 * 9 * 4;
  EXPECT_EQ(blobs[id("conv1")].data_bytes, bytes);
  EXPECT_GE(layout.arena_bytes, bytes + blobs[id("conv2")].data_bytes);

  const MemoryPlanLayout off = PlanNetMemory(*plain, MemoryPlan::kInference, {}, false);
  EXPECT_TRUE(off.in_place_layers.empty());
  EXPECT_GT(off.after(), layout.after());
  const MemoryPlanLayout training = PlanNetMemory(*plain, MemoryPlan::kTraining, {});
  EXPECT_TRUE(training.in_place_layers.empty());

  auto planned = Build(ChainNet(false), MemoryPlan::kInference);
  EXPECT_EQ(planned->blob_by_name("s")->data(), planned->blob_by_name("conv1")->data());
  ExpectSameOutputs(plain.get(), planned.get());
  auto planned_off = Build(ChainNet(false), MemoryPlan::kInference, false);
  EXPECT_NE(planned_off->blob_by_name("s")->data(), planned_off->blob_by_name("r")->data());
  ExpectSameOutputs(plain.get(), planned_off.get());
}

TEST(InPlaceInference, NotWhenTheBottomIsReadLaterOrKept) {
  // r has two consumers (a Split feeds sig and pool_r): sig may not overwrite it; relu still
  // runs in place (conv1 has one consumer).
  auto plain = Build(ChainNet(true), MemoryPlan::kOff);
  const MemoryPlanLayout layout = PlanNetMemory(*plain, MemoryPlan::kInference, {});
  EXPECT_EQ(InPlaceNames(*plain, layout), (std::vector<std::string>{"relu"}));
  auto planned = Build(ChainNet(true), MemoryPlan::kInference);
  ExpectSameOutputs(plain.get(), planned.get());
  // A kept blob keeps its values: no layer writes over it.
  auto plain2 = Build(ChainNet(false), MemoryPlan::kOff);
  const MemoryPlanLayout kept = PlanNetMemory(*plain2, MemoryPlan::kInference, {"r"});
  EXPECT_TRUE(kept.in_place_layers.empty());
  auto planned_kept = Build(ChainNet(false), MemoryPlan::kInference, true, {"r"});
  ExpectSameOutputs(plain2.get(), planned_kept.get());
  const Blob& r = *planned_kept->blob_by_name("r");
  const Blob& r_plain = *plain2->blob_by_name("r");
  for (int64_t i = 0; i < r.count(); ++i)
    ASSERT_EQ(r.cpu_data<float>()[i], r_plain.cpu_data<float>()[i]);
}

TEST(ForwardOnly, InferencePlanRefusesBackwardUntilReplanned) {
  auto net = Build(ChainNet(false), MemoryPlan::kInference);
  net->Forward();
  Layer* relu = net->layer_by_name("relu");
  EXPECT_TRUE(relu->forward_only());
  EXPECT_THROW(relu->Backward(net->top_vecs()[2], {true}, net->bottom_vecs()[2]), RuntimeError);
  EXPECT_THROW(net->Backward(), RuntimeError);
  net->SetMemoryPlan(MemoryPlan::kTraining);
  EXPECT_FALSE(relu->forward_only());
  net->Forward();
  net->Backward();  // runs
}

// Forward-only layers keep no backward state yet give the same tops: max pooling (no argmax),
// LRN (no scale), BatchNorm with global statistics and an in-place Scale (no copy).
TEST(ForwardOnly, ScratchFreeLayersGiveIdenticalOutputs) {
  const std::string text = R"(
    name: "scratch"
    layer { name: "data" type: "Input" top: "data"
            input_param { shape { dim: 2 dim: 4 dim: 10 dim: 10 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 6 kernel_size: 3 pad: 1
                                weight_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"
            batch_norm_param { use_global_stats: true } }
    layer { name: "scale" type: "Scale" bottom: "conv" top: "conv"
            scale_param { bias_term: true filler { type: "uniform" min: 0.5 max: 2 }
                          bias_filler { type: "uniform" min: -1 max: 1 } } }
    layer { name: "lrn" type: "LRN" bottom: "conv" top: "lrn"
            lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 } }
    layer { name: "pool" type: "Pooling" bottom: "lrn" top: "pool"
            pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
  )";
  NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  auto plain = Build(param, MemoryPlan::kOff);
  // Non-trivial statistics: mean c / 4, variance 0.5 + c, scale factor 2.
  Layer* bn = plain->layer_by_name("bn");
  for (int c = 0; c < 6; ++c) {
    bn->blobs()[0]->mutable_cpu_data<float>()[c] = 2 * (c / 4.0f);
    bn->blobs()[1]->mutable_cpu_data<float>()[c] = 2 * (0.5f + c);
  }
  bn->blobs()[2]->mutable_cpu_data<float>()[0] = 2;
  auto planned = Build(param, MemoryPlan::kInference);
  ExpectSameOutputs(plain.get(), planned.get());
}

}  // namespace
}  // namespace crema
