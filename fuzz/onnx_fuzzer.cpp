// ONNX bytes -> read -> ImportOnnx (a deploy net and its weights) -> the deploy net built for
// TEST with the imported weights copied in, as using `crema import-onnx`'s output does.
#include <string>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "onnx/onnx.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string path = fuzz::WriteFile("fuzz.onnx", data, size);
  onnx::ModelProto model;
  NetParameter deploy, weights;
  if (!fuzz::Expect(path, [&] {
        ReadBinaryProto(path, &model);
        ImportOnnx(model, path, &deploy, &weights);
      }))
    return 0;
  fuzz::Expect("", [&] {
    NetOptions options;
    options.override_state = true;
    options.state.set_phase(TEST);
    options.verbose = false;
    Net net(deploy, options);
    net.CopyTrainedLayersFrom(weights);
  });
  return 0;
}
