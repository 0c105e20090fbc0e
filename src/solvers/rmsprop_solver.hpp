#pragma once
// RMSProp (Caffe's "RMSProp"; Tieleman and Hinton 2012). After SGD's normalization, decay and
// clipping, per learnable param i with local_rate = rate * lr_mult_i, element-wise:
//   history_i = rms_decay * history_i + (1 - rms_decay) * diff_i^2
//   diff_i = local_rate * diff_i / (sqrt(history_i) + delta);   w_i -= diff_i
// Params: rms_decay in [0, 1) (default 0.99), delta (default 1e-8); momentum must be 0, as Caffe
// requires. State: one history blob per param, as SGD.
#include "solvers/sgd_solver.hpp"

namespace crema {

class RMSPropSolver final : public SGDSolver {
 public:
  RMSPropSolver(const SolverParameter& param, const SolverOptions& options);
  const char* type() const override { return "RMSProp"; }

 protected:
  void ComputeUpdateValue(int param_id, double rate) override;

 private:
  template <typename T>
  void Update(int param_id, double rate);
};

}  // namespace crema
