#include "solvers/rmsprop_solver.hpp"

#include "crema/error.hpp"
#include "math/math.hpp"
#include "solvers/adaptive_step_cpu.hpp"

#ifdef CREMA_WITH_CUDA
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {

RMSPropSolver::RMSPropSolver(const SolverParameter& param, const SolverOptions& options)
    : SGDSolver(param, options) {
  if (param_.momentum() != 0)
    throw ConfigError(
        ErrorAt("momentum") +
        StrCat("momentum cannot be used with RMSProp: it must be 0, got ", param_.momentum()));
  if (!(param_.rms_decay() >= 0 && param_.rms_decay() < 1))
    throw ConfigError(ErrorAt("rms_decay") +
                      StrCat("rms_decay must lie in [0, 1), got ", param_.rms_decay()));
}

template <typename T>
void RMSPropSolver::Update(int param_id, double rate) {
  const int64_t n = net_->learnable_params()[param_id]->count();
  if (n == 0) return;
  const T local_rate = LocalRate<T>(param_id, rate);
  const T rms_decay = static_cast<T>(param_.rms_decay());
  const T delta = static_cast<T>(param_.delta());
  T* diff = UpdateDiff<T>(param_id);
  T* history = UpdateData<T>(history_[param_id]);
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    gpu::RMSPropUpdate<T>(n, local_rate, rms_decay, delta, diff, history);
    return;
  }
#endif
  // history = rms_decay * history + (1 - rms_decay) * diff^2, then the shared step.
  T* update = UpdateData<T>(update_[param_id]);
  cpu::Powx(n, static_cast<const T*>(diff), T(2), update);
  cpu::Axpby(n, T(1) - rms_decay, static_cast<const T*>(update), rms_decay, history);
  cpu::RootNormalizedStep(n, local_rate, delta, static_cast<const T*>(history), diff, update);
}

void RMSPropSolver::ComputeUpdateValue(int param_id, double rate) {
  CREMA_DISPATCH_FLOAT(net_->learnable_params()[param_id]->dtype(), T, Update<T>(param_id, rate));
}

CREMA_REGISTER_SOLVER(RMSProp, RMSPropSolver);

}  // namespace crema
