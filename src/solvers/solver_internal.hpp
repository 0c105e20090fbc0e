#pragma once
// What the files of the Solver (solver.cpp and solver_*.cpp, one concern each) share; not API.
#include <memory>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "crema/proto_io.hpp"

namespace crema::solver_detail {

// "file:line:col: " of `field` in the solver's prototxt, or "solver: " without a location.
std::string Where(const std::shared_ptr<const ProtoSource>& source, const SolverParameter& param,
                  const std::string& field);
// "a, b, c".
std::string Join(const std::vector<std::string>& items);

}  // namespace crema::solver_detail
