#pragma once
// AdaDelta (Caffe's "AdaDelta"; Zeiler 2012). After SGD's normalization, decay and clipping, per
// learnable param i with local_rate = rate * lr_mult_i, element-wise:
//   history_i = momentum * history_i + (1 - momentum) * diff_i^2
//   diff_i *= sqrt((update_history_i + delta) / (history_i + delta))
//   update_history_i = momentum * update_history_i + (1 - momentum) * diff_i^2
//   diff_i *= local_rate;   w_i -= diff_i
// Params: momentum (the decay, e.g. 0.95), delta (default 1e-8). State, as Caffe lays it out:
// history_ holds N gradient histories, then N update histories (N = number of params).
#include "solvers/sgd_solver.hpp"

namespace crema {

class AdaDeltaSolver final : public SGDSolver {
 public:
  AdaDeltaSolver(const SolverParameter& param, const SolverOptions& options);
  const char* type() const override { return "AdaDelta"; }

 protected:
  void ComputeUpdateValue(int param_id, double rate) override;

 private:
  template <typename T>
  void Update(int param_id, double rate);
};

}  // namespace crema
