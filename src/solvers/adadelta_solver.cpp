#include "solvers/adadelta_solver.hpp"

#include "math/math.hpp"

#ifdef CREMA_WITH_CUDA
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {
namespace {

// Caffe's CPU sequence of calls (pow for squares and roots), for the same rounding.
template <typename T>
void AdaDeltaUpdateCpu(int64_t n, T local_rate, T momentum, T delta, T* diff, T* history,
                       T* update_history, T* update, T* temp) {
  cpu::Powx(n, static_cast<const T*>(diff), T(2), update);
  cpu::Axpby(n, T(1) - momentum, static_cast<const T*>(update), momentum, history);
  cpu::Set(n, delta, temp);
  cpu::Add(n, static_cast<const T*>(temp), static_cast<const T*>(update_history), update);
  cpu::Add(n, static_cast<const T*>(temp), static_cast<const T*>(history), temp);
  cpu::Div(n, static_cast<const T*>(update), static_cast<const T*>(temp), update);
  cpu::Powx(n, static_cast<const T*>(update), T(0.5), update);
  cpu::Mul(n, static_cast<const T*>(diff), static_cast<const T*>(update), diff);
  cpu::Powx(n, static_cast<const T*>(diff), T(2), update);
  cpu::Axpby(n, T(1) - momentum, static_cast<const T*>(update), momentum, update_history);
  cpu::Scale(n, local_rate, static_cast<const T*>(diff), diff);
}

}  // namespace

AdaDeltaSolver::AdaDeltaSolver(const SolverParameter& param, const SolverOptions& options)
    : SGDSolver(param, options) {
  AppendHistoryBlobs();
}

template <typename T>
void AdaDeltaSolver::Update(int param_id, double rate) {
  const int64_t n = net_->learnable_params()[param_id]->count();
  if (n == 0) return;
  const size_t num_params = net_->learnable_params().size();
  const T local_rate = LocalRate<T>(param_id, rate);
  const T momentum = static_cast<T>(param_.momentum());
  const T delta = static_cast<T>(param_.delta());
  T* diff = UpdateDiff<T>(param_id);
  T* history = UpdateData<T>(history_[param_id]);
  T* update_history = UpdateData<T>(history_[num_params + param_id]);
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    gpu::AdaDeltaUpdate<T>(n, local_rate, momentum, delta, diff, history, update_history);
    return;
  }
#endif
  AdaDeltaUpdateCpu<T>(n, local_rate, momentum, delta, diff, history, update_history,
                       UpdateData<T>(update_[param_id]), UpdateData<T>(temp_[param_id]));
}

void AdaDeltaSolver::ComputeUpdateValue(int param_id, double rate) {
  CREMA_DISPATCH_FLOAT(net_->learnable_params()[param_id]->dtype(), T, Update<T>(param_id, rate));
}

CREMA_REGISTER_SOLVER(AdaDelta, AdaDeltaSolver);

}  // namespace crema
