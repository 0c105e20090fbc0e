// .binaryproto bytes -> a BlobProto read into a Blob (as tools and layers load blobs), and the
// same file as transform_param.mean_file (DataTransformer's mean loading).
#include <string>

#include "crema/blob.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "io/data_transformer.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string path = fuzz::WriteFile("fuzz.binaryproto", data, size);
  fuzz::Expect(path, [&] {
    Blob blob;
    ReadBlobFromBinaryFile(path, &blob);
  });
  TransformationParameter param;
  param.set_mean_file(path);
  fuzz::Expect(path, [&] { DataTransformer transformer(param, TEST); });
  return 0;
}
