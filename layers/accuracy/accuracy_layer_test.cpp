#include "layers/accuracy/accuracy_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "crema/device.hpp"
#include "crema/net.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

CREMA_LAYER_CONFORMANCE(
    Accuracy, LayerCase("", {{10, 5}, {10}}).Integer(1, 5).NoGradient(0),
    LayerCase("accuracy_param { top_k: 3 }", {{10, 5}, {10}}).Integer(1, 5).NoGradient(0),
    LayerCase("accuracy_param { axis: 2 }", {{2, 3, 4}, {2, 3}}).Integer(1, 4).NoGradient(0),
    LayerCase("accuracy_param { axis: -1 ignore_label: 1 }", {{2, 3, 4}, {2, 3}})
        .Integer(1, 4)
        .NoGradient(0),
    LayerCase("", {{4, 3, 2, 2}, {4, 1, 2, 2}}).Integer(1, 3).NoGradient(0).Tops(2),
    LayerCase("accuracy_param { top_k: 2 ignore_label: 0 }", {{8, 4}, {8}})
        .Integer(1, 4)
        .NoGradient(0)
        .Tops(2)
        .Phase(TEST));

namespace crema::testing {
namespace {

// Four items, three classes; item 1 has a tie between its true class 0 and class 1.
const std::vector<double> kScores = {0.1, 0.5, 0.4,   // label 1: rank 1
                                     0.3, 0.3, 0.4,   // label 0: tied, ranks behind 2 others
                                     0.7, 0.2, 0.1,   // label 2: rank 3
                                     0.2, 0.3, 0.5};  // label 2: rank 1
const std::vector<double> kLabels = {1, 0, 2, 2};

std::vector<double> RunAccuracy(const std::string& param, int num_tops, DataType dtype,
                                const std::vector<double>& labels = kLabels,
                                const Device& device = Device::Cpu()) {
  auto layer = CreateLayer("type: 'Accuracy' " + param, dtype);
  layer->set_device(device);
  auto scores = MakeBlob({4, 3}, kScores, dtype);
  auto label = MakeBlob({4}, labels, dtype);
  Blob top0, top1;
  BlobVec top = {&top0, &top1};
  top.resize(num_tops);
  layer->SetUp({scores.get(), label.get()}, top);
  layer->Forward({scores.get(), label.get()}, top);
  EXPECT_EQ(top0.num_axes(), 0);
  std::vector<double> result = {top0.data_at(0)};
  if (num_tops == 2) {
    EXPECT_EQ(top1.shape(), std::vector<int>{3});
    for (double v : DataOf(top1)) result.push_back(v);
  }
  return result;
}

// The hand counts hold on the CPU and, where there is one, on a GPU (the element type, and
// whether to run on Device::Cuda(0)).
class AccuracyValues : public ::testing::TestWithParam<std::tuple<DataType, bool>> {
 protected:
  void SetUp() override {
    if (!std::get<1>(GetParam())) return;
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    SetCudaDevice(0);
  }
  std::vector<double> Run(const std::string& param, int num_tops,
                          const std::vector<double>& labels = kLabels) const {
    return RunAccuracy(param, num_tops, std::get<0>(GetParam()), labels,
                       std::get<1>(GetParam()) ? Device::Cuda(0) : Device::Cpu());
  }
};

TEST_P(AccuracyValues, TopK) {
  EXPECT_DOUBLE_EQ(Run("", 1)[0], 0.5);
  EXPECT_DOUBLE_EQ(Run("accuracy_param { top_k: 2 }", 1)[0], 0.5);
  EXPECT_DOUBLE_EQ(Run("accuracy_param { top_k: 3 }", 1)[0], 1.0);
}

TEST_P(AccuracyValues, PerClass) {
  // class 0: 0/1, class 1: 1/1, class 2: 1/2.
  const std::vector<double> r = Run("", 2);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[1], 0.0);
  EXPECT_DOUBLE_EQ(r[2], 1.0);
  EXPECT_DOUBLE_EQ(r[3], 0.5);
}

TEST_P(AccuracyValues, IgnoreLabel) {
  // Without the two class-2 items: 1 of 2 correct; class 2 never counted -> 0.
  const std::vector<double> r = Run("accuracy_param { ignore_label: 2 }", 2);
  EXPECT_DOUBLE_EQ(r[0], 0.5);
  EXPECT_DOUBLE_EQ(r[3], 0.0);
  // An ignore label outside [0, C) is fine; all ignored gives 0.
  EXPECT_DOUBLE_EQ(Run("accuracy_param { ignore_label: -1 }", 1, {-1, -1, -1, -1})[0], 0.0);
}

TEST_P(AccuracyValues, LabelOutOfRangeNamesTheFirst) {
  // The ignored -1 is no error; 3 and then 5 are, and the message names the first.
  try {
    Run("accuracy_param { ignore_label: -1 }", 1, {-1, 3, 1, 5});
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 at position 1 is outside [0, 3)"),
              std::string::npos)
        << e.what();
  }
  // NaN is no class (the GPU's plain cast would make it class 0).
  EXPECT_THROW(Run("", 1, {0, std::nan(""), 1, 0}), RuntimeError);
}

INSTANTIATE_TEST_SUITE_P(Types, AccuracyValues,
                         ::testing::Combine(::testing::Values(DataType::kFloat32,
                                                              DataType::kFloat64),
                                            ::testing::Bool()));

TEST(AccuracyLayer, SpatialAxisMatchesNaiveCount) {
  // Scores (N=2, C=3, inner=2); the class axis is 1, labels (2, 2).
  const std::vector<double> scores = {0.9, 0.1, 0.05, 0.8, 0.05, 0.1,   // n = 0
                                      0.2, 0.3, 0.5,  0.3, 0.3,  0.4};  // n = 1
  auto layer = CreateLayer("type: 'Accuracy'");
  auto bottom = MakeBlob({2, 3, 2}, scores);
  auto label = MakeBlob({2, 2}, {0, 1, 1, 0});  // correct, correct, correct, wrong (tie)
  Blob top;
  layer->SetUp({bottom.get(), label.get()}, {&top});
  layer->Forward({bottom.get(), label.get()}, {&top});
  EXPECT_DOUBLE_EQ(top.data_at(0), 0.75);
}

TEST(AccuracyLayer, LabelOutOfRangeIsRuntimeError) {
  EXPECT_THROW(RunAccuracy("", 1, DataType::kFloat64, {0, 1, 3, 0}), RuntimeError);
}

TEST(AccuracyLayer, TopKAboveClassesIsConfigError) {
  EXPECT_THROW(RunAccuracy("accuracy_param { top_k: 4 }", 1, DataType::kFloat64), ConfigError);
}

TEST(AccuracyLayer, LabelCountMismatchIsConfigError) {
  auto layer = CreateLayer("type: 'Accuracy'");
  auto scores = MakeBlob({4, 3, 2}, {});
  auto label = MakeBlob({4}, {});
  Blob top;
  EXPECT_THROW(layer->SetUp({scores.get(), label.get()}, {&top}), ConfigError);
}

TEST(AccuracyLayer, BackwardIsAConfigError) {
  auto layer = CreateLayer("type: 'Accuracy'");
  auto scores = MakeBlob({4, 3}, kScores);
  auto label = MakeBlob({4}, kLabels);
  Blob top;
  layer->SetUp({scores.get(), label.get()}, {&top});
  layer->Forward({scores.get(), label.get()}, {&top});
  layer->Backward({&top}, {false, false}, {scores.get(), label.get()});  // nothing asked: fine
  EXPECT_THROW(layer->Backward({&top}, {true, false}, {scores.get(), label.get()}), ConfigError);
  EXPECT_FALSE(layer->AllowForceBackward(0));
  EXPECT_FALSE(layer->HasGradient());
}

// A loss_weight on an Accuracy top would make the net run its (missing) Backward: the net is
// refused where it is built, naming the file, the line of the loss_weight and the layer.
TEST(AccuracyLayer, LossWeightIsAConfigErrorAtNetBuild) {
  const std::string path = TempDir() + "/accuracy_loss.prototxt";
  std::ofstream(path) << R"(name: "n"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc"
        loss_weight: 1 }
)";
  for (Phase phase : {TRAIN, TEST}) {
    try {
      Net::FromFile(path, phase);
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path + ":8:9: layer \"acc\" (Accuracy): loss_weight must be 0"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("Accuracy has no gradient"), std::string::npos) << what;
    }
  }
  // A zero weight is fine.
  std::ofstream(path) << R"(name: "n"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
layer { name: "acc" type: "Accuracy" bottom: "data" bottom: "label" top: "acc" loss_weight: 0 }
)";
  EXPECT_NO_THROW(Net::FromFile(path, TRAIN));
}

}  // namespace
}  // namespace crema::testing
