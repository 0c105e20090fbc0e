#include "solvers/loss_scaler.hpp"

#include <glog/logging.h>

#include <cmath>

namespace crema {

LossScaler::LossScaler(double initial_scale, int window) : scale_(initial_scale), window_(window) {
  CREMA_ASSERT(initial_scale > 0 && window > 0, initial_scale, " ", window);
}

bool LossScaler::Unscale(Net* net, int iter) {
  bool finite = true;
  for (const Blob* param : net->learnable_params()) {
    finite = std::isfinite(param->asum_diff());
    if (!finite) break;
  }
  if (!finite) {
    const double old_scale = scale_;
    scale_ /= 2;
    clean_ = 0;
    LOG(WARNING) << "Iteration " << iter << ": fp16 gradients overflowed at loss scale "
                 << old_scale << "; update skipped, loss scale now " << scale_;
    if (scale_ < std::ldexp(1.0, -24))
      CREMA_THROW_RUNTIME("fp16 training: the gradients at iteration ", iter,
                          " are not finite even at loss scale ", old_scale,
                          ": the forward pass or the loss overflows (try --amp bf16, or lower "
                          "base_lr)");
    return false;
  }
  if (scale_ != 1)
    for (Blob* param : net->learnable_params()) param->scale_diff(1 / scale_);
  if (++clean_ >= window_) {
    scale_ *= 2;
    clean_ = 0;
    VLOG(1) << "Iteration " << iter << ": loss scale now " << scale_;
  }
  return true;
}

void LossScaler::Save(SolverState* state) const {
  state->set_amp_loss_scale(static_cast<float>(scale_));
  state->set_amp_clean_iterations(clean_);
}

void LossScaler::Restore(const SolverState& state) {
  if (!state.has_amp_loss_scale()) return;
  if (!(state.amp_loss_scale() > 0) || !std::isfinite(state.amp_loss_scale()))
    CREMA_THROW_CONFIG("amp_loss_scale must be a positive number, got ", state.amp_loss_scale());
  scale_ = state.amp_loss_scale();
  clean_ = state.amp_clean_iterations();
}

}  // namespace crema
