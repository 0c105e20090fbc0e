#include "solvers/adam_solver.hpp"

#include <cmath>

#include "math/math.hpp"

#ifdef CREMA_WITH_CUDA
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {
namespace {

// Caffe's CPU sequence of calls (pow for the root), for the same rounding.
template <typename T>
void AdamUpdateCpu(int64_t n, T corrected_rate, T beta1, T beta2, T eps_hat, T* diff, T* m, T* v,
                   T* temp) {
  cpu::Axpby(n, T(1) - beta1, static_cast<const T*>(diff), beta1, m);
  cpu::Mul(n, static_cast<const T*>(diff), static_cast<const T*>(diff), temp);
  cpu::Axpby(n, T(1) - beta2, static_cast<const T*>(temp), beta2, v);
  cpu::Powx(n, static_cast<const T*>(v), T(0.5), temp);
  cpu::AddScalar(n, eps_hat, temp);
  cpu::Div(n, static_cast<const T*>(m), static_cast<const T*>(temp), temp);
  cpu::Scale(n, corrected_rate, static_cast<const T*>(temp), diff);
}

}  // namespace

AdamSolver::AdamSolver(const SolverParameter& param, const SolverOptions& options)
    : SGDSolver(param, options) {
  AppendHistoryBlobs();
}

template <typename T>
void AdamSolver::Update(int param_id, double rate) {
  const int64_t n = net_->learnable_params()[param_id]->count();
  if (n == 0) return;
  const size_t num_params = net_->learnable_params().size();
  const int t = iter_ + 1;
  const T beta1 = static_cast<T>(param_.momentum());
  const T beta2 = static_cast<T>(param_.momentum2());
  const T eps_hat = static_cast<T>(param_.delta());
  // As Caffe: the powers of the (Dtype) betas in double, the quotient rounded to Dtype.
  const T correction = static_cast<T>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)) /
                                      (1.0 - std::pow(static_cast<double>(beta1), t)));
  const T corrected_rate = LocalRate<T>(param_id, rate) * correction;
  T* diff = UpdateDiff<T>(param_id);
  T* m = UpdateData<T>(history_[param_id]);
  T* v = UpdateData<T>(history_[num_params + param_id]);
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    gpu::AdamUpdate<T>(n, corrected_rate, beta1, beta2, eps_hat, diff, m, v);
    return;
  }
#endif
  AdamUpdateCpu<T>(n, corrected_rate, beta1, beta2, eps_hat, diff, m, v,
                   UpdateData<T>(temp_[param_id]));
}

void AdamSolver::ComputeUpdateValue(int param_id, double rate) {
  CREMA_DISPATCH_FLOAT(net_->learnable_params()[param_id]->dtype(), T, Update<T>(param_id, rate));
}

CREMA_REGISTER_SOLVER(Adam, AdamSolver);

}  // namespace crema
