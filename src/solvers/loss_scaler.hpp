#pragma once
// Dynamic loss scaling for FP16 training (--amp fp16; as PyTorch's GradScaler and NVIDIA Caffe's
// adaptive scale): the loss gradient is multiplied by a scale before Backward, so that small
// gradients stay representable in float16; after Backward the parameter gradients are divided by
// it. When some gradient is not finite (an overflow), the update is skipped and the scale halved;
// after `window` clean iterations in a row it is doubled. Its state goes into the .solverstate.
#include "crema/net.hpp"
#include "crema/proto.hpp"

namespace crema {

class LossScaler {
 public:
  LossScaler(double initial_scale, int window);
  double scale() const { return scale_; }
  int clean_iterations() const { return clean_; }
  // After Backward at iteration `iter`: true when every learnable gradient of `net` is finite,
  // which are then divided by the scale (the update may run); false when one is not (the caller
  // skips the update), with the scale halved and a warning. RuntimeError when the scale falls
  // below 2^-24: the gradients are not finite whatever the scale.
  bool Unscale(Net* net, int iter);
  void Save(SolverState* state) const;
  // Keeps the current state when `state` has none (a state written without --amp fp16).
  void Restore(const SolverState& state);

 private:
  double scale_;
  int window_;
  int clean_ = 0;
};

}  // namespace crema
