// .solverstate bytes -> Solver::Restore into SGD (one history blob per parameter) and Adam (two)
// solvers on a small net. A learned_net of "fuzz.caffemodel" names a valid snapshot of that net
// (written at start-up), so restoring can get past the weights.
#include <memory>
#include <string>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "fuzz_support.hpp"

namespace {
std::unique_ptr<crema::Solver> solvers[2];
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace crema;
  fuzz::Init();
  const char* types[] = {"SGD", "Adam"};
  for (int i = 0; i < 2; ++i) {
    SolverParameter param;
    ParseTextProto(fuzz::kSmallNet, "small net", param.mutable_net_param());
    param.set_type(types[i]);
    param.set_base_lr(0.01);
    param.set_momentum(0.9);
    param.set_lr_policy("fixed");
    param.set_max_iter(10);
    param.set_snapshot_prefix("fuzz");
    solvers[i] = Solver::Create(param);
  }
  NetParameter weights;
  solvers[0]->net()->ToProto(&weights);
  WriteBinaryProto(weights, fuzz::WorkDir() + "/fuzz.caffemodel");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string path = fuzz::WriteFile("fuzz.solverstate", data, size);
  for (auto& solver : solvers) fuzz::Expect(path, [&] { solver->Restore(path); });
  return 0;
}
