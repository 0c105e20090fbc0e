// The detection evaluation: DetectionEvalAccumulator's average precision against values worked
// out by hand, and the solver's test with eval_type "detection" (scores, metrics log, monitors,
// configuration errors).
#include "solvers/detection_eval.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/solver.hpp"
#include "solvers/detection_eval_net.hpp"
#include "solvers/solver_checks.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using solver_checks::ConfigErrorOf;
using solver_checks::ParseSolver;

// A DetectionEvaluate top of `rows` (5 values each).
std::unique_ptr<Blob> Rows(const std::vector<std::vector<float>>& rows) {
  auto blob = std::make_unique<Blob>(std::vector<int>{1, 1, static_cast<int>(rows.size()), 5});
  float* data = blob->mutable_cpu_data<float>();
  for (const auto& row : rows)
    for (float v : row) *data++ = v;
  return blob;
}

// Class 1: 3 + 1 positives over two batches; detections ranked T F T T F F (a (0, 0) row, a
// detection of a difficult box, is skipped though it scores best): precision 1, 1/2, 2/3, 3/4,
// 3/5, 1/2 at recall 1/4, 1/4, 1/2, 3/4, 3/4, 3/4. Class 2: 2 positives, no detection. Class 3:
// no positives, one false detection. Label 7 has detections but no positives row: not a class.
TEST(DetectionEvalAccumulator, AveragePrecisionPerClassAndMean) {
  DetectionEvalAccumulator acc;
  auto first = Rows({{-1, 1, 3, -1, -1},
                     {-1, 2, 2, -1, -1},
                     {-1, 3, 0, -1, -1},
                     {0, 1, 0.9f, 1, 0},
                     {0, 1, 0.95f, 0, 0},
                     {1, 1, 0.8f, 0, 1},
                     {1, 1, 0.6f, 1, 0},
                     {1, 3, 0.3f, 0, 1},
                     {1, 7, 0.99f, 1, 0}});
  auto second = Rows({{-1, 1, 1, -1, -1},
                      {-1, 2, 0, -1, -1},
                      {-1, 3, 0, -1, -1},
                      {0, 1, 0.7f, 1, 0},
                      {0, 1, 0.5f, 0, 1},
                      {0, 1, 0.4f, 0, 1},
                      {0, 0, 0, 0, 0}});
  acc.Add(*first);
  acc.Add(*second);
  EXPECT_EQ(acc.batches(), 2);

  // 11point: recall >= 0, 0.1, 0.2 reaches precision 1; >= 0.3 ... 0.7 reaches 3/4; above, none.
  const double ap_11point = (3 * 1.0 + 5 * 0.75) / 11;
  // MaxIntegral: the best precision to the right, 1, 3/4, 3/4, over recall 1/4 each.
  const double ap_max_integral = 0.25 * 1 + 0.25 * 0.75 + 0.25 * 0.75;
  // Integral: 1, 2/3, 3/4 where the recall grows by 1/4.
  const double ap_integral = 0.25 * 1 + 0.25 * (2.0 / 3) + 0.25 * 0.75;
  const struct {
    const char* version;
    double ap;
  } cases[] = {
      {"11point", ap_11point}, {"MaxIntegral", ap_max_integral}, {"Integral", ap_integral}};
  for (const auto& c : cases) {
    const DetectionEvalAccumulator::Result result = acc.Compute(c.version);
    ASSERT_EQ(result.classes.size(), 3u) << c.version;
    EXPECT_EQ(result.classes[0].label, 1);
    EXPECT_EQ(result.classes[0].positives, 4);
    EXPECT_EQ(result.classes[0].detections, 6);
    EXPECT_NEAR(result.classes[0].ap, c.ap, 1e-5) << c.version;
    EXPECT_EQ(result.classes[1].label, 2);
    EXPECT_EQ(result.classes[1].positives, 2);
    EXPECT_EQ(result.classes[1].detections, 0);
    EXPECT_EQ(result.classes[1].ap, 0);
    EXPECT_EQ(result.classes[2].label, 3);
    EXPECT_EQ(result.classes[2].detections, 1);
    EXPECT_EQ(result.classes[2].ap, 0);
    // As Caffe-SSD: the mean over every class with a positives row, those without ground truth
    // included.
    EXPECT_NEAR(result.map, c.ap / 3, 1e-5) << c.version;
  }
  // The three versions differ here, so a mix-up fails.
  EXPECT_GT(std::abs(ap_11point - ap_max_integral), 1e-3);
  EXPECT_GT(std::abs(ap_max_integral - ap_integral), 1e-3);

  EXPECT_THROW(acc.Compute("VOC2007"), ConfigError);
  EXPECT_EQ(DetectionEvalAccumulator().Compute("11point").map, 0);
  Blob wrong(std::vector<int>{1, 1, 2, 4});
  EXPECT_THROW(acc.Add(wrong), RuntimeError);
}

class DetectionEvalSolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/detection_eval_solver";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    weights_ = dir_ + "/rows.caffemodel";
    detection_eval_net::WriteDetectionEvalWeights(weights_);
  }

  // A solver over the detection net; `extra` adds or overrides solver fields.
  std::unique_ptr<Solver> MakeSolver(const std::string& extra, const char* net = nullptr) {
    NetParameter net_param;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(net ? net : detection_eval_net::kNet,
                                                              &net_param));
    SolverParameter param = ParseSolver(
        "base_lr: 0 lr_policy: 'fixed' max_iter: 1 test_iter: 2 test_interval: 1 "
        "snapshot_prefix: '" +
        dir_ + "/run' weights: '" + weights_ + "' " + extra);
    *param.mutable_net_param() = net_param;
    return Solver::Create(param);
  }

  // The value of `name` in the scores of test net 0 (NaN and a failure when absent).
  static double Score(const std::vector<std::vector<std::pair<std::string, double>>>& scores,
                      const std::string& name) {
    for (const auto& [score_name, value] : scores.at(0))
      if (score_name == name) return value;
    ADD_FAILURE() << "no score " << name;
    return std::nan("");
  }

  std::string dir_, weights_;
};

TEST_F(DetectionEvalSolverTest, ScoresMeanAveragePrecision) {
  const struct {
    const char* version;
    double map;
  } cases[] = {{"11point", detection_eval_net::kMap11Point},
               {"MaxIntegral", detection_eval_net::kMapMaxIntegral},
               {"Integral", detection_eval_net::kMapIntegral}};
  for (const auto& c : cases) {
    auto solver =
        MakeSolver(StrCat("eval_type: 'detection' show_per_class_result: true "
                          "ap_version: '",
                          c.version, "'"));
    const auto scores = solver->TestAll();
    ASSERT_EQ(scores.size(), 1u);
    // The mAP in place of the rows, then the other output's mean, in output order.
    ASSERT_EQ(scores[0].size(), 2u);
    EXPECT_EQ(scores[0][0].first, "detection_eval");
    EXPECT_NEAR(scores[0][0].second, c.map, 1e-5) << c.version;
    EXPECT_NEAR(Score(scores, "gt_sum"), detection_eval_net::kGroundTruthSum, 1e-5);
  }
}

// eval_type "classification" (the default) keeps averaging the rows element by element: one
// score per value of the (fixed-size) DetectionEvaluate top.
TEST_F(DetectionEvalSolverTest, ClassificationAveragesTheRows) {
  auto solver = MakeSolver("");
  const auto scores = solver->TestAll();
  // 2 positives rows + 4 detection rows, 5 values each, then gt_sum.
  ASSERT_EQ(scores[0].size(), 31u);
  // Row 0: [-1, 1, 2, -1, -1]; row 2: the first detection [0, 1, 0.9, 1, 0].
  EXPECT_EQ(scores[0][2].second, 2);
  EXPECT_NEAR(scores[0][12].second, 0.9, 1e-6);
  EXPECT_EQ(scores[0][13].second, 1);
}

// The mAP goes where test scores go: the metrics log, and the monitors that name the output.
TEST_F(DetectionEvalSolverTest, MetricsLogAndMonitors) {
  auto solver = MakeSolver(
      "eval_type: 'detection' ap_version: '11point' "
      "early_stopping { output: 'detection_eval' patience: 5 }");
  solver->Solve();
  std::ifstream in(dir_ + "/run_metrics.jsonl");
  std::stringstream text;
  text << in.rdbuf();
  const std::string log = text.str();
  const size_t at = log.find("\"detection_eval\": ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NEAR(std::strtod(log.c_str() + at + 18, nullptr), detection_eval_net::kMap11Point, 1e-5)
      << log;
  EXPECT_NEAR(solver->last_test_scores().at(0).at(0).second, detection_eval_net::kMap11Point, 1e-5);
}

TEST_F(DetectionEvalSolverTest, ConfigErrors) {
  std::string message = ConfigErrorOf([&] { MakeSolver("eval_type: 'detections'"); });
  EXPECT_NE(message.find("eval_type must be \"classification\" or \"detection\", got "
                         "\"detections\""),
            std::string::npos)
      << message;
  message = ConfigErrorOf([&] { MakeSolver("eval_type: 'detection' ap_version: 'VOC'"); });
  EXPECT_NE(message.find("ap_version must be"), std::string::npos) << message;
  // The ap_version of a classification test is not read.
  EXPECT_NO_THROW(MakeSolver("ap_version: 'VOC'"));
  // A detection test of a net without DetectionEvaluate.
  message = ConfigErrorOf([&] {
    MakeSolver("eval_type: 'detection'", R"(name: "plain"
layer { name: "data" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 1 dim: 1 } shape { dim: 1 dim: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "y" top: "loss" }
)");
  });
  EXPECT_NE(message.find("eval_type is \"detection\" but test net #0 has no output made by a "
                         "DetectionEvaluate layer"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace crema
