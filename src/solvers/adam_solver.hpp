#pragma once
// Adam (Caffe's "Adam"; Kingma and Ba 2014). After SGD's normalization, decay and clipping, per
// learnable param i with local_rate = rate * lr_mult_i and t = iter + 1, element-wise:
//   m_i = beta1 * m_i + (1 - beta1) * diff_i
//   v_i = beta2 * v_i + (1 - beta2) * diff_i^2
//   diff_i = local_rate * sqrt(1 - beta2^t) / (1 - beta1^t) * m_i / (sqrt(v_i) + delta)
//   w_i -= diff_i
// Params: momentum = beta1 (0.9 typical), momentum2 = beta2 (default 0.999), delta (default
// 1e-8). State, as Caffe lays it out: history_ holds N first moments m, then N second moments v.
#include "solvers/sgd_solver.hpp"

namespace crema {

class AdamSolver final : public SGDSolver {
 public:
  AdamSolver(const SolverParameter& param, const SolverOptions& options);
  const char* type() const override { return "Adam"; }

 protected:
  void ComputeUpdateValue(int param_id, double rate) override;

 private:
  template <typename T>
  void Update(int param_id, double rate);
};

}  // namespace crema
