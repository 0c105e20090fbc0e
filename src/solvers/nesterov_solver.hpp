#pragma once
// Nesterov's accelerated gradient (Caffe's "Nesterov"). After SGD's normalization, decay and
// clipping, per learnable param i with local_rate = rate * lr_mult_i:
//   h_prev = history_i
//   history_i = momentum * history_i + local_rate * diff_i
//   diff_i = (1 + momentum) * history_i - momentum * h_prev;   w_i -= diff_i
// State: one history blob per param, as SGD.
#include "solvers/sgd_solver.hpp"

namespace crema {

class NesterovSolver final : public SGDSolver {
 public:
  using SGDSolver::SGDSolver;
  const char* type() const override { return "Nesterov"; }

 protected:
  void ComputeUpdateValue(int param_id, double rate) override;

 private:
  template <typename T>
  void Update(int param_id, double rate);
};

}  // namespace crema
