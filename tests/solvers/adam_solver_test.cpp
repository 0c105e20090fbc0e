// Adam solver: updates on a tiny net against the formula in double, CPU vs GPU, the BVLC
// reference run (LeNet on fashion-mnist, 10 iterations), resume equivalence, configuration.
#include "solvers/adam_solver.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

// history[0]: first moment m; history[1]: second moment v. Bias correction with t = iter + 1.
ReferenceRule AdamRule(double beta1, double beta2, double eps) {
  return [beta1, beta2, eps](int iter, double local_rate, const std::vector<double>& g,
                             ParamState* state, std::vector<double>* step) {
    std::vector<double>& m = state->history[0];
    std::vector<double>& v = state->history[1];
    const int t = iter + 1;
    const double correction = std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
    step->resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      (*step)[i] = local_rate * correction * m[i] / (std::sqrt(v[i]) + eps);
    }
  };
}

TEST(AdamSolverTest, MatchesFormulaOnTinyNet) {
  CheckTinyNetAgainstRule("type: 'Adam' base_lr: 0.1 momentum: 0.9", 2,
                          AdamRule(0.9f, 0.999f, 1e-8f));
  CheckTinyNetAgainstRule(
      "type: 'Adam' base_lr: 0.1 momentum: 0.8 momentum2: 0.99 delta: 0.01 weight_decay: 0.05 "
      "iter_size: 2",
      2, AdamRule(0.8f, 0.99f, 0.01f), 4);
}

TEST(AdamSolverTest, GpuMatchesCpu) {
  CheckGpuMatchesCpu("type: 'Adam' base_lr: 0.1 momentum: 0.9 weight_decay: 0.01");
}

TEST(AdamSolverTest, MatchesCaffeReferenceRun) {
  CREMA_REQUIRE_REFERENCE(solver_file, "bvlc/solvers/adam/solver.prototxt");
  ReferenceRunResult result;
  // History within 1e-3: the conv weights' moments differ by up to ~6e-4 from Caffe's, nearly all
  // of it in 1% of the elements (max-pooling near-ties the tiny weight differences flip, which
  // Adam's normalized steps carry on); the other moments agree to ~2e-6.
  CheckReferenceRun(solver_file, "adam", 1e-3, &result);
  EXPECT_LT(result.worst_param, 1e-4);
}

TEST(AdamSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("type: 'Adam' base_lr: 0.001 momentum: 0.9 momentum2: 0.999", 2);
}

TEST(AdamSolverTest, TypeAndLegacyEnum) {
  // Caffe's layout: the first moments of all params, then their second moments.
  CheckTypeAndLegacyEnum<AdamSolver>("ADAM", "Adam", 2);
}

TEST(AdamSolverTest, RestoringAnotherSolversStateIsAConfigError) {
  const std::string dir = testing::TempDir();
  auto sgd = MakeTinySolver("base_lr: 0.1 lr_policy: 'fixed' snapshot_prefix: '" + dir + "/sgd'");
  sgd->Step(1);
  sgd->Snapshot();
  auto adam = MakeTinySolver("type: 'Adam' base_lr: 0.1 lr_policy: 'fixed'");
  const std::string error = ConfigErrorOf([&] { adam->Restore(dir + "/sgd_iter_1.solverstate"); });
  EXPECT_NE(error.find("2 history blobs"), std::string::npos) << error;
  EXPECT_NE(error.find("Adam"), std::string::npos) << error;
  EXPECT_NE(error.find("needs 4"), std::string::npos) << error;
}

}  // namespace
}  // namespace crema
