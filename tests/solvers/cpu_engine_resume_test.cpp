// Under --cpu_engine auto the engines are decided before the first iteration (on scratch blobs,
// leaving the net as it was) and kept in the .solverstate: a run resumed from a snapshot ends
// with the very weights of the uninterrupted run, and the state names each choice.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

// The zoo's LeNet (models/lenet/lenet.prototxt) trained on a constant batch of 16: DummyData
// (which keeps no position a snapshot would need) instead of its Input, a loss instead of Softmax.
NetParameter LeNet() {
  NetParameter net;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/lenet/lenet.prototxt", &net);
  LayerParameter* data = net.mutable_layer(0);
  data->Clear();
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"(name: "data" type: "DummyData" top: "data" top: "label"
         dummy_data_param { shape { dim: 16 dim: 1 dim: 28 dim: 28 } shape { dim: 16 }
                            data_filler { type: "constant" value: 0.25 }
                            data_filler { type: "constant" value: 3 } })",
      data));
  LayerParameter* head = net.mutable_layer(net.layer_size() - 1);
  head->set_type("SoftmaxWithLoss");
  head->set_name("loss");
  head->add_bottom("label");
  head->set_top(0, "loss");
  return net;
}

class CpuEngineResume : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = GetCpuEngine();
    SetCpuEngine(CpuEngine::kAuto);
    dir_ = fs::temp_directory_path() / ("crema_engine_resume_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    SetCpuEngine(before_);
    setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
    fs::remove_all(dir_);
  }
  std::unique_ptr<Solver> MakeSolver() const {
    SolverParameter param;
    *param.mutable_net_param() = LeNet();
    param.set_base_lr(0.01f);
    param.set_momentum(0.9f);
    param.set_weight_decay(0.0005f);
    param.set_lr_policy("fixed");
    param.set_max_iter(100);
    param.set_display(0);
    param.set_random_seed(11);
    param.set_snapshot_after_train(false);
    param.set_snapshot_prefix((dir_ / "lenet").string());
    param.set_metrics_log(false);
    param.set_tensorboard(false);
    return Solver::Create(param, SolverOptions{});
  }
  static std::string StateOf(const std::string& model) {
    return model.substr(0, model.size() - std::string(".caffemodel").size()) + ".solverstate";
  }
  static std::vector<std::vector<float>> Weights(const Solver& solver) {
    std::vector<std::vector<float>> weights;
    for (const Blob* p : solver.net()->learnable_params())
      weights.emplace_back(p->cpu_data<float>(), p->cpu_data<float>() + p->count());
    return weights;
  }

  CpuEngine before_ = CpuEngine::kCaffe;
  fs::path dir_;
};

// Without the choice cache: the resumed solver takes its engines from the .solverstate, so it
// continues exactly as the interrupted solver would have (racing again on real passes would mix
// the two engines' roundings into the weights).
TEST_F(CpuEngineResume, ResumedRunContinuesBitForBit) {
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  auto first = MakeSolver();
  first->Step(3);
  const std::string state = StateOf(first->Snapshot());
  first->Step(5);
  auto resumed = MakeSolver();
  resumed->Restore(state);
  resumed->Step(5);
  EXPECT_EQ(Weights(*resumed), Weights(*first));

  // The state names the choice of each racing layer and direction (with oneDNN in the build).
  SolverState saved;
  ReadBinaryProto(state, &saved);
  if (!DnnlBuilt()) {
    EXPECT_EQ(saved.cpu_engine_size(), 0);
    GTEST_SKIP() << "built without oneDNN: no engine to choose";
  }
  std::vector<std::string> choices;
  for (const CpuEngineState& e : saved.cpu_engine())
    choices.push_back(e.layer() + " " + e.direction());
  for (const std::string& want :
       {"conv1 forward", "conv1 backward", "ip1 forward", "ip2 backward", "pool1 forward"})
    EXPECT_NE(std::find(choices.begin(), choices.end(), want), choices.end()) << want;
}

// Decisions for oneDNN's Winograd convolution (dnnl and winograd set) and for crema's blocked
// kernel (blocked set, not dnnl: a reader that predates it takes crema's plain kernel) go into
// the .solverstate and come back from it as such.
TEST_F(CpuEngineResume, KernelDecisionsSurviveTheSolverState) {
  if (!DnnlBuilt()) GTEST_SKIP() << "built without oneDNN: no engine to choose";
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  auto first = MakeSolver();
  first->Step(1);
  CpuEngineChoice* choice = first->net()->layer_by_name("conv2")->cpu_engine_choice();
  ASSERT_NE(choice, nullptr);
  const std::vector<int> shape = first->net()->blob_by_name("pool1")->shape();
  const std::map<std::string, CpuKernel> kernels = {{"backward", CpuKernel::kDnnlWinograd},
                                                    {"forward", CpuKernel::kCremaBlocked}};
  for (const auto& [direction, kernel] : kernels) choice->Restore({direction, shape, kernel});
  const std::string state = StateOf(first->Snapshot());
  SolverState saved;
  ReadBinaryProto(state, &saved);
  int found = 0;
  for (const CpuEngineState& e : saved.cpu_engine()) {
    if (e.layer() != "conv2") continue;
    ++found;
    const bool winograd = e.direction() == "backward";
    EXPECT_EQ(e.dnnl(), winograd) << e.direction();
    EXPECT_EQ(e.winograd(), winograd) << e.direction();
    EXPECT_EQ(e.blocked(), !winograd) << e.direction();
  }
  EXPECT_EQ(found, 2);
  auto resumed = MakeSolver();
  resumed->Restore(state);
  int restored = 0;
  for (const CpuEngineChoice::Decision& d :
       resumed->net()->layer_by_name("conv2")->cpu_engine_choice()->Decisions())
    if (d.shape == shape) {
      ++restored;
      EXPECT_EQ(d.kernel, kernels.at(d.direction)) << d.direction;
    }
  EXPECT_EQ(restored, 2);
}

// With the choice cache, solvers built afresh (as separate processes would) run the engines the
// first one decided: an uninterrupted run and a run resumed from a snapshot end with the same
// weights, bit for bit.
TEST_F(CpuEngineResume, ResumedRunEqualsTheUninterruptedOneBitForBit) {
  if (!DnnlBuilt()) GTEST_SKIP() << "built without oneDNN: no engine to choose";
  const fs::path cache = dir_ / "cpu_engines.tsv";
  setenv("CREMA_CPU_ENGINE_CACHE", cache.string().c_str(), 1);
  auto straight = MakeSolver();
  straight->Step(8);
  ASSERT_TRUE(fs::exists(cache));
  auto first = MakeSolver();
  first->Step(3);
  const std::string state = StateOf(first->Snapshot());
  auto resumed = MakeSolver();
  resumed->Restore(state);
  resumed->Step(5);
  EXPECT_EQ(Weights(*resumed), Weights(*straight));
  // One line per layer configuration and direction: conv1 and conv2 differ, so do ip1 and ip2.
  std::ifstream in(cache);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_GE(lines, 9) << "conv1, conv2, ip1, ip2 both ways, pool1 and pool2 forward";
}

// With every choice in the cache, preparing runs no layer: not even MAX pooling, whose Backward
// runs the engine its Forward ran (no race of its own to wait for): its scratch blobs would add
// to the memory in use when a solver prepares again before its first iteration.
TEST_F(CpuEngineResume, NetWithEveryChoiceCachedRunsNoLayerToPrepare) {
  if (!DnnlBuilt()) GTEST_SKIP() << "built without oneDNN: no engine to choose";
  const fs::path cache = dir_ / "cpu_engines.tsv";
  setenv("CREMA_CPU_ENGINE_CACHE", cache.string().c_str(), 1);
  MakeSolver()->Step(1);
  ASSERT_TRUE(fs::exists(cache));
  auto again = MakeSolver();
  again->net()->PrepareCpuEngines();
  for (const char* name : {"conv1", "pool1", "conv2", "pool2", "ip1", "ip2"}) {
    const CpuEngineChoice* choice = again->net()->layer_by_name(name)->cpu_engine_choice();
    ASSERT_NE(choice, nullptr) << name;
    EXPECT_STREQ(choice->last(), "") << name << " ran";
  }
}

// Deciding leaves the net as it was: a net whose engines were prepared computes what a net that
// never raced computes, under the engines chosen.
TEST_F(CpuEngineResume, PreparingLeavesTheNetAsItWas) {
  const NetParameter param = LeNet();
  NetOptions options;
  options.verbose = false;
  Net net(param, options);
  std::vector<std::vector<float>> diffs_before;
  for (Blob* p : net.learnable_params()) {
    p->mutable_cpu_diff<float>()[0] = 7.0f;
    diffs_before.emplace_back(p->cpu_diff<float>(), p->cpu_diff<float>() + p->count());
  }
  net.PrepareCpuEngines();
  for (size_t j = 0; j < net.learnable_params().size(); ++j) {
    const Blob* p = net.learnable_params()[j];
    EXPECT_EQ(std::vector<float>(p->cpu_diff<float>(), p->cpu_diff<float>() + p->count()),
              diffs_before[j])
        << "gradient of parameter " << j;
  }
  if (DnnlBuilt()) {
    const CpuEngineChoice* choice = net.layer_by_name("conv1")->cpu_engine_choice();
    ASSERT_NE(choice, nullptr);
    EXPECT_TRUE(choice->Decided("forward", net.blob_by_name("data")->shape()));
    EXPECT_TRUE(choice->Decided("backward", net.blob_by_name("data")->shape()));
  }
}

// Layers of one configuration on one shape (ResNet's repeated blocks) race once: the later ones
// take the first one's decisions and never run a pass of their own. A layer of another
// configuration races for itself.
TEST_F(CpuEngineResume, IdenticalLayersRaceOnce) {
  if (!DnnlBuilt()) GTEST_SKIP() << "built without oneDNN: no engine to choose";
  setenv("CREMA_CPU_ENGINE_CACHE", "off", 1);
  NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"(layer { name: "data" type: "Input" top: "data"
                 input_param { shape { dim: 2 dim: 16 dim: 10 dim: 10 } } }
         layer { name: "a" type: "Convolution" bottom: "data" top: "a"
                 convolution_param { num_output: 16 kernel_size: 3 pad: 1
                                     weight_filler { type: "gaussian" std: 0.1 } } }
         layer { name: "b" type: "Convolution" bottom: "a" top: "b"
                 convolution_param { num_output: 16 kernel_size: 3 pad: 1
                                     weight_filler { type: "gaussian" std: 0.1 } } }
         layer { name: "c" type: "Convolution" bottom: "b" top: "c"
                 convolution_param { num_output: 16 kernel_size: 1
                                     weight_filler { type: "gaussian" std: 0.1 } } }
         layer { name: "loss" type: "EuclideanLoss" bottom: "c" bottom: "data" top: "loss" })",
      &param));
  NetOptions options;
  options.verbose = false;
  Net net(param, options);
  net.PrepareCpuEngines();
  const std::vector<int> shape = net.blob_by_name("data")->shape();
  const CpuEngineChoice* a = net.layer_by_name("a")->cpu_engine_choice();
  const CpuEngineChoice* b = net.layer_by_name("b")->cpu_engine_choice();
  const CpuEngineChoice* c = net.layer_by_name("c")->cpu_engine_choice();
  ASSERT_TRUE(a != nullptr && b != nullptr && c != nullptr);
  EXPECT_STRNE(a->last(), "");  // raced
  EXPECT_STREQ(b->last(), "");  // took a's decisions without a pass
  EXPECT_STRNE(c->last(), "");  // another configuration: raced
  const auto kernels = [&](const CpuEngineChoice* choice) {
    std::vector<CpuKernel> decided;
    for (const char* direction : {"forward", "backward"})
      for (const CpuEngineChoice::Decision& d : choice->Decisions())
        if (d.direction == direction && d.shape == shape) decided.push_back(d.kernel);
    return decided;
  };
  EXPECT_EQ(kernels(a).size(), 2u);
  EXPECT_EQ(kernels(b), kernels(a));
}

}  // namespace
}  // namespace crema
