// AdaDelta solver: updates on a tiny net against the formula in double, CPU vs GPU, resume
// equivalence on LeNet, history layout.
#include "solvers/adadelta_solver.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

// history[0]: mean square of gradients; history[1]: mean square of updates.
ReferenceRule AdaDeltaRule(double momentum, double delta) {
  return [momentum, delta](int, double local_rate, const std::vector<double>& g, ParamState* state,
                           std::vector<double>* step) {
    std::vector<double>& h = state->history[0];
    std::vector<double>& h2 = state->history[1];
    step->resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      h[i] = momentum * h[i] + (1 - momentum) * g[i] * g[i];
      const double update = g[i] * std::sqrt((h2[i] + delta) / (h[i] + delta));
      h2[i] = momentum * h2[i] + (1 - momentum) * update * update;
      (*step)[i] = local_rate * update;
    }
  };
}

TEST(AdaDeltaSolverTest, MatchesFormulaOnTinyNet) {
  CheckTinyNetAgainstRule("type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 1e-6", 2,
                          AdaDeltaRule(0.95f, 1e-6f));
  CheckTinyNetAgainstRule(
      "type: 'AdaDelta' base_lr: 2 momentum: 0.9 delta: 0.01 weight_decay: 0.05 iter_size: 2", 2,
      AdaDeltaRule(0.9f, 0.01f));
}

TEST(AdaDeltaSolverTest, GpuMatchesCpu) {
  CheckGpuMatchesCpu("type: 'AdaDelta' base_lr: 1 momentum: 0.9 delta: 0.01 weight_decay: 0.01");
}

TEST(AdaDeltaSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("type: 'AdaDelta' base_lr: 1 momentum: 0.95 delta: 1e-6", 2);
}

TEST(AdaDeltaSolverTest, TypeAndLegacyEnum) {
  // Caffe's layout: the gradient histories of all params, then their update histories.
  CheckTypeAndLegacyEnum<AdaDeltaSolver>("ADADELTA", "AdaDelta", 2);
}

}  // namespace
}  // namespace crema
