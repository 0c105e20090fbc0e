#pragma once
// Caffe's learning-rate schedules (SolverParameter.lr_policy), as one function of the solver's
// settings and its position, with no state of its own:
//   fixed      base_lr
//   step       base_lr * gamma ^ floor(iter / stepsize)
//   exp        base_lr * gamma ^ iter
//   inv        base_lr * (1 + gamma * iter) ^ (-power)
//   multistep  base_lr * gamma ^ step (step: the stepvalues reached, see below)
//   poly       base_lr * (1 - iter / max_iter) ^ power
//   sigmoid    base_lr / (1 + exp(-gamma * (iter - stepsize)))
#include <functional>
#include <string>

#include "crema/proto.hpp"

namespace crema {

// The rate at iteration `iter`. `step` is the number of stepvalues passed before this iteration
// (Caffe's current_step; multistep advances it by at most one here, when iter reaches the next
// stepvalue). ConfigError, prefixed with where(field) ("file:line:col: "), for an unknown or
// missing policy and for gamma < 0, stepsize <= 0 or max_iter <= 0 where the policy uses them.
double LearningRateAt(const SolverParameter& param, int iter, int step,
                      const std::function<std::string(const std::string&)>& where);

}  // namespace crema
