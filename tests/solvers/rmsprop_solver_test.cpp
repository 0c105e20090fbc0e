// RMSProp solver: updates on a tiny net against the formula in double, CPU vs GPU, resume
// equivalence on LeNet, configuration errors.
#include "solvers/rmsprop_solver.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

ReferenceRule RMSPropRule(double rms_decay, double delta) {
  return [rms_decay, delta](int, double local_rate, const std::vector<double>& g, ParamState* state,
                            std::vector<double>* step) {
    std::vector<double>& h = state->history[0];
    step->resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      h[i] = rms_decay * h[i] + (1 - rms_decay) * g[i] * g[i];
      (*step)[i] = local_rate * g[i] / (std::sqrt(h[i]) + delta);
    }
  };
}

TEST(RMSPropSolverTest, MatchesFormulaOnTinyNet) {
  CheckTinyNetAgainstRule("type: 'RMSProp' base_lr: 0.01", 1, RMSPropRule(0.99f, 1e-8f));
  CheckTinyNetAgainstRule(
      "type: 'RMSProp' base_lr: 0.01 rms_decay: 0.9 delta: 0.01 weight_decay: 0.05 iter_size: 2", 1,
      RMSPropRule(0.9f, 0.01f));
}

TEST(RMSPropSolverTest, GpuMatchesCpu) {
  CheckGpuMatchesCpu("type: 'RMSProp' base_lr: 0.01 rms_decay: 0.9 weight_decay: 0.01");
}

TEST(RMSPropSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("type: 'RMSProp' momentum: 0 base_lr: 0.001 rms_decay: 0.98", 1);
}

TEST(RMSPropSolverTest, ConfigErrors) {
  // Caffe: "Momentum cannot be used with RMSProp." and "rms_decay should lie between 0 and 1."
  std::string error = ConfigErrorOf(
      [] { MakeTinySolver("type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.5"); });
  EXPECT_NE(error.find("momentum"), std::string::npos) << error;
  EXPECT_NE(error.find("RMSProp"), std::string::npos) << error;
  for (const char* rms_decay : {"1", "1.5", "-0.1"}) {
    error = ConfigErrorOf([&] {
      MakeTinySolver(std::string("type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed' rms_decay: ") +
                     rms_decay);
    });
    EXPECT_NE(error.find("rms_decay"), std::string::npos) << error;
  }
  // The bounds themselves: 0 is allowed.
  EXPECT_NO_THROW(MakeTinySolver("type: 'RMSProp' base_lr: 0.1 lr_policy: 'fixed' rms_decay: 0"));
}

TEST(RMSPropSolverTest, TypeAndLegacyEnum) {
  CheckTypeAndLegacyEnum<RMSPropSolver>("RMSPROP", "RMSProp", 1);
}

}  // namespace
}  // namespace crema
