// Whole-iteration CUDA graphs (src/net/iteration_graph.hpp): which layers may be captured, the
// uncaptured fallback, and on a GPU: captured training equal bit for bit to uncaptured training,
// no device allocation in a steady-state iteration, snapshot and resume, re-capture after a
// reshape, the deferred label check and the non-finite-loss guard of a captured update.
#include "net/iteration_graph.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_allocator.hpp"
#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/solver.hpp"
#include "solvers/datum_db.hpp"

namespace crema {
namespace {

// Input-fed: data (4 x 3 x 8 x 8) and label (4); conv -> relu -> pool -> ip -> softmax loss.
std::string InputNetText(const std::string& extra_layer = "") {
  return R"(name: "g"
    layer { name: "input" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } shape { dim: 4 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: "xavier" }
                                bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
    layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
            pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
)" + extra_layer +
         R"(
    layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
            inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" })";
}

NetParameter Parse(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::unique_ptr<Net> MakeNet(const Device& device, const std::string& extra_layer = "") {
  NetOptions options;
  options.device = device;
  NetParameter param = Parse(InputNetText(extra_layer));
  param.mutable_state()->set_phase(TRAIN);
  return std::make_unique<Net>(param, options);
}

// Fills the input blobs with values that depend on `step`; labels in [0, 5).
void FillInputs(Net* net, int step) {
  Blob* data = net->blob_by_name("data").get();
  float* x = data->mutable_cpu_data<float>();
  for (int64_t i = 0; i < data->count(); ++i) x[i] = std::sin(0.37f * i + step) * 0.8f;
  Blob* label = net->blob_by_name("label").get();
  float* y = label->mutable_cpu_data<float>();
  for (int64_t i = 0; i < label->count(); ++i) y[i] = static_cast<float>((i + step) % 5);
}

bool HasGpu() { return CudaDeviceCount() > 0; }

TEST(IterationGraph, LayersSayWhetherTheirGpuPathCanBeCaptured) {
  const auto capturable = [](const std::string& text) {
    LayerParameter param;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
    return LayerRegistry::Create(param)->SupportsGraphCapture();
  };
  EXPECT_TRUE(capturable(R"(name: "r" type: "ReLU")"));
  EXPECT_TRUE(capturable(R"(name: "s" type: "SoftmaxWithLoss")"));
  EXPECT_TRUE(capturable(R"(name: "b" type: "BatchNorm")"));
  EXPECT_TRUE(capturable(R"(name: "e" type: "Eltwise")"));
  // A new mask seed every iteration, a host-side accuracy: not capturable.
  EXPECT_FALSE(capturable(R"(name: "d" type: "Dropout")"));
  EXPECT_FALSE(capturable(R"(name: "a" type: "Accuracy")"));
}

TEST(IterationGraph, OnTheCpuRunsUncapturedWithTheSameLoss) {
  auto net = MakeNet(Device::Cpu());
  EXPECT_EQ(net->num_input_layers(), 1);
  EXPECT_EQ(net->GraphCaptureBlocker(), "the net runs on the CPU");
  IterationGraph graph(net.get(), true);
  FillInputs(net.get(), 0);
  const double expected = net->Forward();
  const double loss = graph.Run([&] { net->ForwardFrom(net->num_input_layers()); });
  EXPECT_EQ(loss, expected);
  EXPECT_GT(loss, 0);
  EXPECT_FALSE(graph.replayed());
  EXPECT_EQ(graph.reason(), "the net runs on the CPU");
}

TEST(IterationGraph, SignatureFollowsShapes) {
  auto net = MakeNet(Device::Cpu());
  const auto before = net->GraphSignature();
  EXPECT_EQ(net->GraphSignature(), before);
  net->blob_by_name("data")->Reshape(std::vector<int>{2, 3, 8, 8});
  net->blob_by_name("label")->Reshape(std::vector<int>{2});
  net->Reshape();
  EXPECT_NE(net->GraphSignature(), before);
}

// ---- GPU ----

std::string SolverText(const std::string& lmdb, bool dropout) {
  return StrCat(R"(net_param { name: "lenetish"
      layer { name: "data" type: "Data" top: "data" top: "label"
              data_param { source: ")",
                lmdb, R"(" backend: LMDB batch_size: 8 }
              transform_param { crop_size: 12 mirror: true scale: 0.004 } }
      layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
              convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "xavier" } } }
      layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
              pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
      layer { name: "relu1" type: "ReLU" bottom: "pool1" top: "pool1" }
      layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
              inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
      layer { name: "relu2" type: "ReLU" bottom: "ip1" top: "ip1" })",
                dropout ? R"(
      layer { name: "drop" type: "Dropout" bottom: "ip1" top: "ip1" })"
                        : "",
                R"(
      layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
              inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" } }
    base_lr: 0.05 momentum: 0.9 weight_decay: 0.001 lr_policy: "step" gamma: 0.5 stepsize: 5
    display: 0 max_iter: 14 snapshot_after_train: false deterministic: true random_seed: 7)");
}

std::string WriteLmdb() {
  return testing_db::WriteDatumDb(
      "graph_lmdb", 40, 3, 14, 14,
      [](int i, int j) { return static_cast<uint8_t>((i * 37 + j * 11) % 256); },
      [](int i) { return i % 4; });
}

std::vector<std::vector<float>> Weights(const Solver& solver) {
  std::vector<std::vector<float>> weights;
  for (const Blob* blob : solver.net()->learnable_params())
    weights.emplace_back(blob->cpu_data<float>(), blob->cpu_data<float>() + blob->count());
  return weights;
}

struct TrainResult {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses;
  bool replayed = false;
  std::string reason;
};

std::unique_ptr<Solver> GpuSolver(const std::string& text, bool cuda_graph) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  SolverOptions options;
  options.device = Device::Cuda(0);
  options.cuda_graph = cuda_graph;
  return Solver::Create(param, options);
}

TrainResult Train(const std::string& text, bool cuda_graph) {
  auto solver = GpuSolver(text, cuda_graph);
  TrainResult result;
  for (int i = 0; i < solver->param().max_iter(); ++i) {
    solver->Step(1);
    result.losses.push_back(solver->smoothed_loss());
  }
  result.replayed = solver->graph_replayed();
  result.reason = solver->graph_reason();
  result.weights = Weights(*solver);
  return result;
}

TEST(IterationGraph, CapturedTrainingEqualsUncapturedBitForBit) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const std::string text = SolverText(WriteLmdb(), false);
  const TrainResult plain = Train(text, false);
  const TrainResult captured = Train(text, true);
  EXPECT_FALSE(plain.replayed);
  EXPECT_TRUE(captured.replayed) << captured.reason;
  ASSERT_EQ(plain.losses.size(), captured.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i)
    EXPECT_EQ(plain.losses[i], captured.losses[i]) << "iteration " << i;
  ASSERT_EQ(plain.weights.size(), captured.weights.size());
  for (size_t i = 0; i < plain.weights.size(); ++i) {
    ASSERT_EQ(plain.weights[i].size(), captured.weights[i].size());
    EXPECT_EQ(std::memcmp(plain.weights[i].data(), captured.weights[i].data(),
                          plain.weights[i].size() * sizeof(float)),
              0)
        << "parameter blob " << i;
  }
  // Training moved the weights and the loss (the comparison is not of untouched values).
  EXPECT_NE(plain.losses.front(), plain.losses.back());
}

TEST(IterationGraph, ANetWithDropoutRunsUncapturedAndSaysWhy) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const TrainResult result = Train(SolverText(WriteLmdb(), true), true);
  EXPECT_FALSE(result.replayed);
  EXPECT_NE(result.reason.find("layer \"drop\" (Dropout)"), std::string::npos) << result.reason;
  EXPECT_TRUE(std::isfinite(result.losses.back()));
}

// A captured run snapshotted at iteration 6 and resumed (captured again) ends where an
// uninterrupted captured run does, bit for bit.
TEST(IterationGraph, SnapshotAndResumeAreUnaffected) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::TempDir();  // a new folder each call
  const std::string text =
      SolverText(WriteLmdb(), false) + " snapshot_prefix: \"" + dir + "/graph_resume\"";
  auto whole = GpuSolver(text, true);
  whole->Step(12);
  EXPECT_TRUE(whole->graph_replayed()) << whole->graph_reason();
  auto first = GpuSolver(text, true);
  first->Step(6);
  ASSERT_TRUE(first->graph_replayed()) << first->graph_reason();
  first->Snapshot();
  auto resumed = GpuSolver(text, true);
  resumed->Restore(dir + "/graph_resume_iter_6.solverstate");
  resumed->Step(6);
  EXPECT_TRUE(resumed->graph_replayed()) << resumed->graph_reason();
  const auto expected = Weights(*whole);
  const auto got = Weights(*resumed);
  ASSERT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(std::memcmp(expected[i].data(), got[i].data(), expected[i].size() * sizeof(float)), 0)
        << "parameter blob " << i;
}

// No cudaMalloc in iterations 3 to 10, captured or not.
TEST(IterationGraph, NoDeviceAllocationInASteadyStateIteration) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const std::string text = SolverText(WriteLmdb(), false);
  for (bool cuda_graph : {false, true}) {
    auto solver = GpuSolver(text, cuda_graph);
    solver->Step(2);
    const int64_t before = gpu::GetMemoryStats(0).cuda_mallocs;
    solver->Step(8);
    EXPECT_EQ(gpu::GetMemoryStats(0).cuda_mallocs - before, 0) << "cuda_graph " << cuda_graph;
    EXPECT_EQ(solver->graph_replayed(), cuda_graph) << solver->graph_reason();
  }
}

// A new batch size drops the graph; the iteration is captured again and computes what an
// uncaptured net computes.
TEST(IterationGraph, ReshapeCapturesAgain) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  gpu::SetDeterministic(true);  // both nets run the same cuDNN algorithms
  auto captured = MakeNet(Device::Cuda(0));
  auto plain = MakeNet(Device::Cuda(0));
  plain->ShareTrainedLayersWith(*captured);
  IterationGraph graph(captured.get(), true);
  const auto step = [](Net* net, IterationGraph* g) {
    const int start = net->num_input_layers();
    const auto body = [&] {
      net->ClearParamDiffs();
      net->ForwardFrom(start);
      net->BackwardTo(start);
    };
    if (g != nullptr) return g->Run(body);
    net->ClearParamDiffs();
    const double loss = net->Forward();
    net->BackwardTo(start);
    return loss;
  };
  for (int batch : {4, 4, 4, 4, 6, 6, 6, 6}) {
    for (Net* net : {captured.get(), plain.get()}) {
      net->blob_by_name("data")->Reshape(std::vector<int>{batch, 3, 8, 8});
      net->blob_by_name("label")->Reshape(std::vector<int>{batch});
      FillInputs(net, batch);
    }
    const double loss = step(captured.get(), &graph);
    const double expected = step(plain.get(), nullptr);
    EXPECT_NEAR(loss, expected, 1e-6 * std::fabs(expected)) << "batch " << batch;
    const Blob* a = captured->layers()[1]->blobs()[0].get();
    const Blob* b = plain->layers()[1]->blobs()[0].get();
    EXPECT_EQ(std::memcmp(a->cpu_diff<float>(), b->cpu_diff<float>(), a->count() * sizeof(float)),
              0)
        << "conv weight gradient, batch " << batch;
  }
  EXPECT_TRUE(graph.replayed()) << graph.reason();
  EXPECT_EQ(graph.captures(), 2);
  gpu::SetDeterministic(false);
}

// A label out of range is found after the replay (the check the uncaptured Forward runs).
TEST(IterationGraph, ABadLabelIsReportedUnderReplay) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  auto net = MakeNet(Device::Cuda(0));
  IterationGraph graph(net.get(), true);
  const int start = net->num_input_layers();
  const auto body = [&] { net->ForwardFrom(start); };
  for (int i = 0; i < 4; ++i) {
    FillInputs(net.get(), i);
    graph.Run(body);
  }
  ASSERT_TRUE(graph.replayed()) << graph.reason();
  FillInputs(net.get(), 0);
  net->blob_by_name("label")->mutable_cpu_data<float>()[2] = 9;
  try {
    graph.Run(body);
    FAIL() << "no error for label 9";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("loss"), std::string::npos) << e.what();
  }
}

// With the update in the graph, a non-finite loss leaves the weights and history untouched and
// the solver stops as it does uncaptured.
TEST(IterationGraph, ACapturedUpdateSkipsItselfOnANonFiniteLoss) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  SolverParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "base_lr: 0.01 momentum: 0.9 lr_policy: \"fixed\" display: 0 max_iter: 100 "
      "random_seed: 3",
      &param));
  *param.mutable_net_param() = Parse(InputNetText());
  SolverOptions options;
  options.device = Device::Cuda(0);
  auto solver = Solver::Create(param, options);
  Net* net = solver->net();
  for (int i = 0; i < 5; ++i) {
    FillInputs(net, i);
    solver->Step(1);
  }
  ASSERT_TRUE(solver->graph_replayed()) << solver->graph_reason();
  // An infinite loss weight (it sits in the loss top's diff; written on the host, so the replay
  // must see it) makes the weighted loss infinite. (A NaN in the net would not do: the GPU loss
  // clamps NaN probabilities to FLT_MIN, as Caffe's.)
  net->blob_by_name("loss")->mutable_cpu_diff<float>()[0] = std::numeric_limits<float>::infinity();
  const auto before = Weights(*solver);
  FillInputs(net, 5);
  EXPECT_THROW(solver->Step(1), RuntimeError);
  EXPECT_TRUE(solver->graph_replayed());
  const auto after = Weights(*solver);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(std::memcmp(before[i].data(), after[i].data(), before[i].size() * sizeof(float)), 0)
        << "parameter blob " << i;
}

}  // namespace
}  // namespace crema
