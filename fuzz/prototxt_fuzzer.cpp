// Prototxt text -> parse (with source locations) -> legacy upgrade -> Net built for TRAIN and
// for TEST on the CPU. Also parsed as a solver prototxt (with its upgrades).
#include <memory>
#include <string>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "net/upgrade.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string name = "fuzz.prototxt";
  NetParameter param;
  std::shared_ptr<ProtoSource> source;
  const bool parsed = fuzz::Expect(name, [&] {
    source = ParseTextProto(text, name, &param);
    UpgradeNetAsNeeded(name, &param);
  });
  if (parsed) {
    for (Phase phase : {TRAIN, TEST}) {
      fuzz::Expect("", [&] {
        NetOptions options;
        options.override_state = true;
        options.state.set_phase(phase);
        options.source = source;
        options.verbose = false;
        Net net(param, options);
      });
    }
  }
  SolverParameter solver;
  fuzz::Expect(name, [&] {
    ParseTextProto(text, name, &solver);
    UpgradeSolverAsNeeded(name, &solver);
  });
  return 0;
}
