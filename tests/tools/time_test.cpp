// `crema time` end to end: training iterations with the solver's update (--solver), inference
// passes (--phase TEST, forward only), --iterations/--seconds, --threads and the peak RSS line.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "crema/layer_registry.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

using testing::RunCrema;

// Batch 4 of 3x5x5 constants -> InnerProduct (3 outputs) -> SoftmaxWithLoss.
constexpr char kNet[] = R"(name: "timed"
layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 3 dim: 5 dim: 5 } shape { dim: 4 }
                           data_filler { type: "constant" value: 0.5 }
                           data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

class TimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!LayerRegistry::Has("DummyData") || !LayerRegistry::Has("InnerProduct") ||
        !LayerRegistry::Has("SoftmaxWithLoss"))
      GTEST_SKIP() << "layer types of the test net are not built";
    dir_ = ::testing::TempDir();
    net_ = dir_ + "/timed.prototxt";
    solver_ = dir_ + "/timed_solver.prototxt";
    std::ofstream(net_) << kNet;
    std::ofstream(solver_) << "net: \"" << net_
                           << "\"\nbase_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 "
                              "lr_policy: \"fixed\" max_iter: 1000 display: 1 test_interval: 0 "
                              "snapshot: 0\n";
  }
  std::string dir_, net_, solver_;
};

TEST_F(TimeTest, TrainingWithSolverUpdate) {
  const testing::CremaResult r = RunCrema("time --solver " + solver_ + " --iterations 3");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("Average Backward pass"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("Average training iteration \\(forward, backward, SGD update\\) over 3 "
                           "iterations: [0-9.]+ ms = [0-9.]+ images/s \\(batch 4\\)")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("Peak resident memory: [0-9.]+ MiB")))
      << r.output;
}

TEST_F(TimeTest, SolverWithSeparateTestNetFiles) {
  // As the SSD branch's solvers: train_net and test_net files with their test_iter. Timing
  // builds the train net only.
  const std::string solver = dir_ + "/separate_solver.prototxt";
  std::ofstream(solver) << "train_net: \"" << net_ << "\"\ntest_net: \"" << net_
                        << "\"\ntest_iter: 2\ntest_interval: 10\nbase_lr: 0.01\n"
                           "lr_policy: \"fixed\"\nmax_iter: 100\n";
  const testing::CremaResult r = RunCrema("time --solver " + solver + " --iterations 2");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("over 2 iterations"), std::string::npos) << r.output;
}

TEST_F(TimeTest, PlainUpdateWithModel) {
  const testing::CremaResult r = RunCrema("time --model " + net_ + " --iterations 2");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("Average training iteration (forward, backward, update) over 2 "),
            std::string::npos)
      << r.output;
}

TEST_F(TimeTest, InferenceIsForwardOnly) {
  const testing::CremaResult r =
      RunCrema("time --model " + net_ + " --phase TEST --iterations 2 --threads 1");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output.find("Backward"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("Average inference pass \\(forward\\) over 2 iterations: [0-9.]+ ms = "
                           "[0-9.]+ images/s \\(batch 4\\)")))
      << r.output;
  // Every layer's backward column is zero.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("ip +InnerProduct +[0-9.]+ +0\\.00000")))
      << r.output;
  EXPECT_NE(r.output.find("CPU threads: 1 (OpenMP), 1 (OpenBLAS"), std::string::npos) << r.output;
}

// The arithmetic of the net (InnerProduct 4x75 -> 3: 1800 FLOP forward, as many for the weight
// gradient; the data needs none) per layer and per iteration, against the measured sgemm peak,
// and the CPU engine each layer ran.
TEST_F(TimeTest, ReportsArithmeticAndEngines) {
  const testing::CremaResult train =
      RunCrema("time --model " + net_ + " --iterations 2 --threads 1");
  ASSERT_EQ(train.rc, 0) << train.output;
  EXPECT_TRUE(std::regex_search(train.output,
                                std::regex("ip +InnerProduct +[0-9.]+ +[0-9.]+ +[0-9.]+ +crema")))
      << train.output;
  EXPECT_TRUE(std::regex_search(
      train.output,
      std::regex(
          "Arithmetic: 3\\.6e-06 GFLOP per iteration \\(convolutions and inner products\\) = "
          "[0-9.]+ GFLOP/s, [0-9]+% of the measured FP32 peak \\(sgemm 2048\\^3, 1 threads: "
          "[0-9.]+ GFLOP/s\\)")))
      << train.output;
  const testing::CremaResult test =
      RunCrema("time --model " + net_ + " --phase TEST --iterations 2 --threads 1");
  ASSERT_EQ(test.rc, 0) << test.output;
  EXPECT_NE(test.output.find("Arithmetic: 1.8e-06 GFLOP per pass"), std::string::npos)
      << test.output;
}

// The per-layer table times the steps the net runs: in an inference pass BatchNorm and Scale
// fold into the convolution and the in-place ReLU runs inside it, so the three are timed with
// it on its row (timed alone, the ReLU would make a pass of its own that no whole pass makes).
TEST_F(TimeTest, FusedLayersAreTimedWithTheirConvolution) {
  for (const char* type : {"Convolution", "BatchNorm", "Scale", "ReLU", "Pooling"})
    if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " is not built";
  const std::string net = dir_ + "/fused.prototxt";
  std::ofstream(net) << R"(name: "fused"
layer { name: "data" type: "DummyData" top: "data"
        dummy_data_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 }
                           data_filler { type: "gaussian" std: 1 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1
                            weight_filler { type: "xavier" } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
)";
  const testing::CremaResult r =
      RunCrema("time --model " + net + " --phase TEST --iterations 2 --threads 1");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n  conv +Convolution\\+ReLU +[0-9.]+")))
      << r.output;
  for (const char* fused : {"bn +BatchNorm", "scale +Scale", "relu +ReLU"})
    EXPECT_TRUE(std::regex_search(r.output,
                                  std::regex(std::string("\\n  ") + fused + " +\\(with +conv\\)")))
        << fused << "\n"
        << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\\n  pool +Pooling +[0-9.]+"))) << r.output;
}

// --seconds keeps timing whole iterations until that long has passed: on this tiny net (well
// under a millisecond an iteration) 0.3 s takes many more than --iterations 2, and the
// iterations timed add up to at least 0.3 s. With --seconds ignored both checks fail.
TEST_F(TimeTest, SecondsRunsAtLeastTheIterationsAndTheTime) {
  const testing::CremaResult r =
      RunCrema("time --model " + net_ + " --phase TEST --iterations 2 --seconds 0.3");
  ASSERT_EQ(r.rc, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("over ([0-9]+) iterations: ([0-9.]+) ms")))
      << r.output;
  const int iterations = std::stoi(m[1]);
  const double ms_each = std::stod(m[2]);
  EXPECT_GT(iterations, 2) << r.output;
  EXPECT_GE(iterations * (ms_each + 0.5e-5), 300.0) << r.output;  // ms_each has 5 decimals
  // And --iterations still sets the least: a long minimum with no --seconds.
  const testing::CremaResult fixed =
      RunCrema("time --model " + net_ + " --phase TEST --iterations 7");
  ASSERT_EQ(fixed.rc, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("over 7 iterations: "), std::string::npos) << fixed.output;
}

TEST_F(TimeTest, BadFlagsAreConfigErrors) {
  EXPECT_EQ(RunCrema("time --model " + net_ + " --solver " + solver_).rc, 2);
  EXPECT_EQ(RunCrema("time --solver " + solver_ + " --phase TEST").rc, 2);
  EXPECT_EQ(RunCrema("time --model " + net_ + " --seconds -1").rc, 2);
  EXPECT_EQ(RunCrema("time --model " + net_ + " --threads -2").rc, 2);
  const testing::CremaResult r = RunCrema("time");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crema
