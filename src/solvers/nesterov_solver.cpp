#include "solvers/nesterov_solver.hpp"

#include "math/math.hpp"

#ifdef CREMA_WITH_CUDA
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {
namespace {

// Caffe's CPU sequence of BLAS calls, for the same rounding.
template <typename T>
void NesterovUpdateCpu(int64_t n, T local_rate, T momentum, T* diff, T* history, T* update) {
  cpu::Copy(n, static_cast<const T*>(history), update);
  cpu::Axpby(n, local_rate, static_cast<const T*>(diff), momentum, history);
  cpu::Axpby(n, T(1) + momentum, static_cast<const T*>(history), -momentum, update);
  cpu::Copy(n, static_cast<const T*>(update), diff);
}

}  // namespace

template <typename T>
void NesterovSolver::Update(int param_id, double rate) {
  const int64_t n = net_->learnable_params()[param_id]->count();
  if (n == 0) return;
  const T local_rate = LocalRate<T>(param_id, rate);
  const T momentum = static_cast<T>(param_.momentum());
  T* diff = UpdateDiff<T>(param_id);
  T* history = UpdateData<T>(history_[param_id]);
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    gpu::NesterovUpdate<T>(n, local_rate, momentum, diff, history);
    return;
  }
#endif
  NesterovUpdateCpu<T>(n, local_rate, momentum, diff, history, UpdateData<T>(update_[param_id]));
}

void NesterovSolver::ComputeUpdateValue(int param_id, double rate) {
  CREMA_DISPATCH_FLOAT(net_->learnable_params()[param_id]->dtype(), T, Update<T>(param_id, rate));
}

CREMA_REGISTER_SOLVER(Nesterov, NesterovSolver);

}  // namespace crema
