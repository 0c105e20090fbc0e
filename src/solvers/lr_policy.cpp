#include "solvers/lr_policy.hpp"

#include <cmath>

#include "crema/error.hpp"

namespace crema {

double LearningRateAt(const SolverParameter& param, int iter, int step,
                      const std::function<std::string(const std::string&)>& where) {
  const std::string& policy = param.lr_policy();
  const double base_lr = param.base_lr();
  const double gamma = param.gamma();
  const double power = param.power();
  auto require_gamma = [&] {
    if (param.gamma() < 0)
      throw ConfigError(where("gamma") + StrCat("gamma must be >= 0 for lr_policy \"", policy,
                                                "\", got ", param.gamma()));
  };
  auto require_stepsize = [&] {
    if (param.stepsize() <= 0)
      throw ConfigError(where("stepsize") + StrCat("stepsize must be > 0 for lr_policy \"", policy,
                                                   "\", got ", param.stepsize()));
  };
  if (policy == "fixed") return base_lr;
  if (policy == "step") {
    require_stepsize();
    require_gamma();
    return base_lr * std::pow(gamma, iter / param.stepsize());
  }
  if (policy == "exp") {
    require_gamma();
    return base_lr * std::pow(gamma, iter);
  }
  if (policy == "inv") {
    require_gamma();
    return base_lr * std::pow(1.0 + gamma * iter, -power);
  }
  if (policy == "multistep") {
    require_gamma();
    // Caffe advances current_step at most once per iteration, when iter reaches the next
    // stepvalue; the solver commits that advance after the update (SGDSolver).
    if (step < param.stepvalue_size() && iter >= param.stepvalue(step)) ++step;
    return base_lr * std::pow(gamma, step);
  }
  if (policy == "poly") {
    if (param.max_iter() <= 0)
      throw ConfigError(
          where("max_iter") +
          StrCat("max_iter must be > 0 for lr_policy \"poly\", got ", param.max_iter()));
    return base_lr * std::pow(1.0 - static_cast<double>(iter) / param.max_iter(), power);
  }
  if (policy == "sigmoid") {
    require_gamma();
    require_stepsize();
    return base_lr *
           (1.0 / (1.0 + std::exp(-gamma * (static_cast<double>(iter) - param.stepsize()))));
  }
  throw ConfigError(where("lr_policy") +
                    (policy.empty()
                         ? std::string("lr_policy is not set")
                         : "lr_policy: unknown learning rate policy \"" + policy + "\"") +
                    "; expected one of fixed, step, exp, inv, multistep, poly, sigmoid");
}

}  // namespace crema
