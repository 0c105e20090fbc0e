#pragma once
// Solver settings that are legal but almost certainly not meant: a negative base_lr (the update
// climbs the loss) and a max_iter of 0 or less (nothing trains). The solver logs them as
// warnings with their file:line:col; `crema validate` reports them as warnings.
#include <string>
#include <utility>
#include <vector>

#include "crema/proto.hpp"

namespace crema {

// (field, message) pairs, e.g. {"base_lr", "base_lr is -0.01: ..."}; empty when none apply.
std::vector<std::pair<std::string, std::string>> SolverWarnings(const SolverParameter& param);

}  // namespace crema
