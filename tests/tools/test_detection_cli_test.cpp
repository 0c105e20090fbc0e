// `crema test` on a net ending in DetectionEvaluate: mean average precision under the three
// ap_versions and per class, gathered over the iterations, instead of the rows' means; the other
// outputs are averaged as before. Also `crema train` with eval_type "detection" (the solver's
// log lines).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "crema/error.hpp"
#include "solvers/detection_eval_net.hpp"
#include "support/run_command.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RunCrema;

class TestDetectionCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/test_detection_cli";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    net_ = dir_ + "/net.prototxt";
    std::ofstream(net_) << detection_eval_net::kNet;
    weights_ = dir_ + "/rows.caffemodel";
    detection_eval_net::WriteDetectionEvalWeights(weights_);
  }

  // The number printed after `key` in `text` (NaN and a failure when absent).
  static double After(const std::string& text, const std::string& key) {
    const size_t at = text.find(key);
    if (at == std::string::npos) {
      ADD_FAILURE() << "no \"" << key << "\" in:\n" << text;
      return std::nan("");
    }
    return std::strtod(text.c_str() + at + key.size(), nullptr);
  }

  std::string dir_, net_, weights_;
};

TEST_F(TestDetectionCliTest, PrintsMeanAveragePrecision) {
  const auto r =
      RunCrema("test --model " + net_ + " --weights " + weights_ + " --iterations 2 2>/dev/null");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(After(r.output, "detection_eval: mAP 11point = "), detection_eval_net::kMap11Point,
              1e-5);
  EXPECT_NEAR(After(r.output, ", MaxIntegral = "), detection_eval_net::kMapMaxIntegral, 1e-5);
  EXPECT_NEAR(After(r.output, ", Integral = "), detection_eval_net::kMapIntegral, 1e-5);
  EXPECT_NE(r.output.find("(2 classes, 2 batches)\n"), std::string::npos) << r.output;
  // Class 1 (4 positives, 6 detections): twice the class's mAP share; class 2: 0.
  EXPECT_NEAR(After(r.output, "detection_eval: class1 AP 11point = "),
              2 * detection_eval_net::kMap11Point, 1e-5);
  EXPECT_NE(r.output.find("(4 ground truth boxes, 6 detections)\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("detection_eval: class2 AP 11point = 0, MaxIntegral = 0, Integral = 0 "
                          "(2 ground truth boxes, 2 detections)\n"),
            std::string::npos)
      << r.output;
  // The rows are not averaged; the other output is.
  EXPECT_EQ(r.output.find("detection_eval ="), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("detection_eval: not averaged"), std::string::npos) << r.output;
  EXPECT_NEAR(After(r.output, "\ngt_sum = "), detection_eval_net::kGroundTruthSum, 1e-5);
}

// crema train with a detection test logs Caffe-SSD's lines (the mAP as the output's value, each
// class's AP with show_per_class_result).
TEST_F(TestDetectionCliTest, TrainLogsDetectionEval) {
  const std::string solver = dir_ + "/solver.prototxt";
  const auto write_solver = [&](const std::string& eval_type) {
    std::ofstream(solver) << "net: '" << net_ << "' weights: '" << weights_
                          << "' base_lr: 0 lr_policy: 'fixed' max_iter: 1 test_iter: 2 "
                             "test_interval: 1 snapshot_prefix: '"
                          << dir_ << "/run' ap_version: 'Integral' show_per_class_result: true\n"
                          << "eval_type: '" << eval_type << "'\n";
  };
  write_solver("detection");
  const auto r = RunCrema("train --solver " + solver);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(After(r.output, "Test net output #0: detection_eval = "),
              detection_eval_net::kMapIntegral, 1e-5);
  EXPECT_NEAR(After(r.output, "] class1: "), 2 * detection_eval_net::kMapIntegral, 1e-5);
  EXPECT_NE(r.output.find("] class2: 0\n"), std::string::npos) << r.output;

  write_solver("segmentation");
  const auto bad = RunCrema("train --solver " + solver);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_NE(bad.output.find("solver.prototxt:2:"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("eval_type must be \"classification\" or \"detection\", got "
                            "\"segmentation\""),
            std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace crema
