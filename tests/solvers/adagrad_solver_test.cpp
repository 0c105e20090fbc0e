// AdaGrad solver: updates on a tiny net against the formula in double, CPU vs GPU, resume
// equivalence on LeNet, configuration errors.
#include "solvers/adagrad_solver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
}

ReferenceRule AdaGradRule(double delta) {
  return [delta](int, double local_rate, const std::vector<double>& g, ParamState* state,
                 std::vector<double>* step) {
    std::vector<double>& h = state->history[0];
    step->resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      h[i] += g[i] * g[i];
      (*step)[i] = local_rate * g[i] / (std::sqrt(h[i]) + delta);
    }
  };
}

TEST(AdaGradSolverTest, MatchesFormulaOnTinyNet) {
  CheckTinyNetAgainstRule("type: 'AdaGrad' base_lr: 0.1", 1, AdaGradRule(1e-8f));
  CheckTinyNetAgainstRule("type: 'AdaGrad' base_lr: 0.1 delta: 0.5 weight_decay: 0.05 iter_size: 2",
                          1, AdaGradRule(0.5f));
}

TEST(AdaGradSolverTest, GpuMatchesCpu) {
  CheckGpuMatchesCpu("type: 'AdaGrad' base_lr: 0.1 weight_decay: 0.01");
}

TEST(AdaGradSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("type: 'AdaGrad' momentum: 0", 1);
}

TEST(AdaGradSolverTest, ConfigErrors) {
  // Caffe: "Momentum cannot be used with AdaGrad."
  const std::string error = ConfigErrorOf(
      [] { MakeTinySolver("type: 'AdaGrad' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9"); });
  EXPECT_NE(error.find("momentum"), std::string::npos) << error;
  EXPECT_NE(error.find("AdaGrad"), std::string::npos) << error;
  EXPECT_NE(error.find("0.9"), std::string::npos) << error;

  // From a solver file: the error names the file, line and field.
  const std::string dir = testing::TempDir();
  {
    std::ofstream out(dir + "/solver.prototxt");
    out << "net_param {" << kTinyNet
        << "}\ntype: \"AdaGrad\"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: \"fixed\"\n";
  }
  SolverParameter param;
  SolverOptions options;
  options.source = ReadSolverParamsFromTextFile(dir + "/solver.prototxt", &param);
  const std::string located = ConfigErrorOf([&] { Solver::Create(param, options); });
  EXPECT_NE(located.find("solver.prototxt:"), std::string::npos) << located;
  EXPECT_NE(located.find(":" + std::to_string(CountLines(kTinyNet) + 3) + ":"), std::string::npos)
      << located;
  EXPECT_NE(located.find("momentum"), std::string::npos) << located;
}

TEST(AdaGradSolverTest, TypeAndLegacyEnum) {
  CheckTypeAndLegacyEnum<AdaGradSolver>("ADAGRAD", "AdaGrad", 1);
}

}  // namespace
}  // namespace crema
