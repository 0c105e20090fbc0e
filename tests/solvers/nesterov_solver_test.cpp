// Nesterov solver: updates on a tiny net against the formula in double, CPU vs GPU, resume
// equivalence on LeNet, configuration.
#include "solvers/nesterov_solver.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

ReferenceRule NesterovRule(double momentum) {
  return [momentum](int, double local_rate, const std::vector<double>& g, ParamState* state,
                    std::vector<double>* step) {
    std::vector<double>& h = state->history[0];
    step->resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const double previous = h[i];
      h[i] = momentum * h[i] + local_rate * g[i];
      (*step)[i] = (1 + momentum) * h[i] - momentum * previous;
    }
  };
}

TEST(NesterovSolverTest, MatchesFormulaOnTinyNet) {
  const double momentum = 0.9f;
  CheckTinyNetAgainstRule("type: 'Nesterov' base_lr: 0.1 momentum: 0.9", 1, NesterovRule(momentum));
  CheckTinyNetAgainstRule(
      "type: 'Nesterov' base_lr: 0.1 momentum: 0.9 weight_decay: 0.05 iter_size: 2", 1,
      NesterovRule(momentum));
  CheckTinyNetAgainstRule("type: 'Nesterov' base_lr: 0.05 momentum: 0", 1, NesterovRule(0));
}

TEST(NesterovSolverTest, GpuMatchesCpu) {
  CheckGpuMatchesCpu("type: 'Nesterov' base_lr: 0.1 momentum: 0.9 weight_decay: 0.01");
}

TEST(NesterovSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("type: 'Nesterov'", 1);
}

TEST(NesterovSolverTest, TypeAndLegacyEnum) {
  CheckTypeAndLegacyEnum<NesterovSolver>("NESTEROV", "Nesterov", 1);
}

}  // namespace
}  // namespace crema
