#pragma once
// A solver for the CLI tests whose results are known in closed form: DummyData gives x = 1 and
// y = 2, an InnerProduct without bias (weight w, filled with `w0`) predicts p = w * x, and a
// EuclideanLoss gives L = (w - 2)^2 / 2. Plain SGD (no momentum, no decay) makes
// w_k - 2 = (w0 - 2) (1 - lr)^k, so after k iterations the test loss is (w0 - 2)^2 (1 - lr)^2k / 2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "crema/layer_registry.hpp"

namespace crema::testing {

inline double RegressionLoss(double lr, int iterations, double w0 = 0) {
  return (w0 - 2) * (w0 - 2) * std::pow(1 - lr, 2 * iterations) / 2;
}

inline std::string RegressionNet() {
  return R"(name: "reg"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 1 dim: 1 } shape { dim: 1 dim: 1 }
    data_filler { type: "constant" value: 1 } data_filler { type: "constant" value: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "p"
  inner_product_param { num_output: 1 bias_term: false
                        weight_filler { type: "constant" value: 0 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
)";
}

// `net_line` is e.g. `net: "/abs/net.prototxt"` or `net_param { ... }`.
inline std::string RegressionSolver(const std::string& net_line, const std::string& prefix) {
  return net_line + R"(
test_iter: 1
test_interval: 1000
base_lr: 0.1
lr_policy: "fixed"
max_iter: 10
snapshot_prefix: ")" +
         prefix + R"("
type: "SGD"
)";
}

// A fresh folder per test with net.prototxt and solver.prototxt (snapshots under snap/reg).
class RegressionSolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"DummyData", "InnerProduct", "EuclideanLoss"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/" + info->test_suite_name() + "_" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    net_ = dir_ + "/net.prototxt";
    std::ofstream(net_) << RegressionNet();
    prefix_ = dir_ + "/snap/reg";
    solver_ = dir_ + "/solver.prototxt";
    std::ofstream(solver_) << RegressionSolver("net: \"" + net_ + "\"", prefix_);
  }
  std::string dir_, net_, prefix_, solver_;
};

}  // namespace crema::testing
