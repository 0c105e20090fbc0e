#include "solvers/adagrad_solver.hpp"

#include "crema/error.hpp"
#include "math/math.hpp"
#include "solvers/adaptive_step_cpu.hpp"

#ifdef CREMA_WITH_CUDA
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {

AdaGradSolver::AdaGradSolver(const SolverParameter& param, const SolverOptions& options)
    : SGDSolver(param, options) {
  if (param_.momentum() != 0)
    throw ConfigError(
        ErrorAt("momentum") +
        StrCat("momentum cannot be used with AdaGrad: it must be 0, got ", param_.momentum()));
}

template <typename T>
void AdaGradSolver::Update(int param_id, double rate) {
  const int64_t n = net_->learnable_params()[param_id]->count();
  if (n == 0) return;
  const T local_rate = LocalRate<T>(param_id, rate);
  const T delta = static_cast<T>(param_.delta());
  T* diff = UpdateDiff<T>(param_id);
  T* history = UpdateData<T>(history_[param_id]);
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    gpu::AdaGradUpdate<T>(n, local_rate, delta, diff, history);
    return;
  }
#endif
  // history += diff^2 (Caffe squares with pow), then the shared step.
  T* update = UpdateData<T>(update_[param_id]);
  cpu::Powx(n, static_cast<const T*>(diff), T(2), update);
  cpu::Add(n, static_cast<const T*>(update), static_cast<const T*>(history), history);
  cpu::RootNormalizedStep(n, local_rate, delta, static_cast<const T*>(history), diff, update);
}

void AdaGradSolver::ComputeUpdateValue(int param_id, double rate) {
  CREMA_DISPATCH_FLOAT(net_->learnable_params()[param_id]->dtype(), T, Update<T>(param_id, rate));
}

CREMA_REGISTER_SOLVER(AdaGrad, AdaGradSolver);

}  // namespace crema
