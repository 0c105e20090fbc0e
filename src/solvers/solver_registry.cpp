// The solver registry: update rules register by their Caffe `type` string (sgd_solver.cpp and
// the others); Solver::Create upgrades a legacy SolverParameter and builds the one it names.
#include <map>

#include "core/closest_name.hpp"
#include "crema/solver.hpp"
#include "net/upgrade.hpp"
#include "solvers/solver_internal.hpp"

namespace crema {
namespace {

using solver_detail::Join;
using solver_detail::Where;

std::map<std::string, SolverRegistry::Creator>& Table() {
  static auto* table = new std::map<std::string, SolverRegistry::Creator>();
  return *table;
}

}  // namespace

void SolverRegistry::Add(const std::string& type, Creator creator) {
  CREMA_ASSERT(!Table().count(type), "solver type ", type, " registered twice");
  Table()[type] = std::move(creator);
}

bool SolverRegistry::Has(const std::string& type) { return Table().count(type) > 0; }

std::vector<std::string> SolverRegistry::Types() {
  std::vector<std::string> types;
  for (const auto& entry : Table()) types.push_back(entry.first);
  return types;
}

std::unique_ptr<Solver> SolverRegistry::Create(const SolverParameter& param,
                                               const SolverOptions& opts) {
  auto it = Table().find(param.type());
  if (it == Table().end()) {
    const std::string best = ClosestName(param.type(), Types());
    CREMA_THROW_CONFIG(Where(opts.source, param, "type"), "type: unknown solver type \"",
                       param.type(), "\".", best.empty() ? "" : " Did you mean \"" + best + "\"?",
                       " Known types: ", Join(Types()));
  }
  return it->second(param, opts);
}

std::unique_ptr<Solver> Solver::Create(const SolverParameter& param, const SolverOptions& options) {
  SolverParameter upgraded = param;
  UpgradeSolverAsNeeded(options.source ? options.source->path() : "solver", &upgraded);
  return SolverRegistry::Create(upgraded, options);
}

std::vector<std::string> Solver::Types() { return SolverRegistry::Types(); }

}  // namespace crema
