// .caffemodel bytes -> read (with legacy upgrade) -> copy into a small net, strictly (Net::
// CopyTrainedLayersFrom, as test/forward/--weights do) and skipping mismatched layers (as
// fine-tuning does).
#include <memory>
#include <string>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"

namespace {
std::unique_ptr<crema::Net> net;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  crema::NetParameter param;
  crema::ParseTextProto(crema::fuzz::kSmallNet, "small net", &param);
  crema::NetOptions options;
  options.verbose = false;
  net = std::make_unique<crema::Net>(param, options);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string path = fuzz::WriteFile("fuzz.caffemodel", data, size);
  fuzz::Expect(path, [&] { net->CopyTrainedLayersFrom(path); });
  fuzz::Expect(path, [&] { net->CopyTrainedLayersFrom(path, /*skip_mismatched=*/true); });
  return 0;
}
