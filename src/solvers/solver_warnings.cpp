#include "solvers/solver_warnings.hpp"

#include "crema/error.hpp"

namespace crema {

std::vector<std::pair<std::string, std::string>> SolverWarnings(const SolverParameter& param) {
  std::vector<std::pair<std::string, std::string>> warnings;
  if (param.base_lr() < 0)
    warnings.emplace_back("base_lr", StrCat("base_lr is ", param.base_lr(),
                                            ": a negative learning rate climbs the loss instead "
                                            "of descending it"));
  if (param.max_iter() <= 0 && !param.has_max_epoch())
    warnings.emplace_back("max_iter", StrCat("max_iter is ", param.max_iter(),
                                             ": no training iteration will run (set max_iter "
                                             "or max_epoch)"));
  return warnings;
}

}  // namespace crema
