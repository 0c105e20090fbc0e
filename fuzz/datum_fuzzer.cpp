// Datum bytes -> parse -> DataTransformer decode and transform (raw, float and encoded records)
// under several parameter sets: crop + mirror + mean_file in TRAIN, mean_value + scale in TEST,
// force_color and force_gray for encoded images; both the batch path (Decode/ShapeOf/Transform)
// and the per-record path (InferBlobShape/Transform) the data layers use.
#include <memory>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "io/data_transformer.hpp"

namespace {
std::vector<std::unique_ptr<crema::DataTransformer>> transformers;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace crema;
  fuzz::Init();
  Blob mean(std::vector<int>{1, 3, 8, 8});
  for (int64_t i = 0; i < mean.count(); ++i) mean.mutable_cpu_data<float>()[i] = i % 7;
  BlobProto mean_proto;
  mean.ToProto(&mean_proto);
  const std::string mean_file = fuzz::WorkDir() + "/mean.binaryproto";
  WriteBinaryProto(mean_proto, mean_file);

  TransformationParameter train;
  train.set_crop_size(4);
  train.set_mirror(true);
  train.set_mean_file(mean_file);
  TransformationParameter test;
  test.add_mean_value(104);
  test.add_mean_value(117);
  test.add_mean_value(123);
  test.set_scale(0.5f);
  test.set_crop_size(3);
  TransformationParameter color;
  color.set_force_color(true);
  color.set_mirror(true);
  color.add_mean_value(10);
  TransformationParameter gray;
  gray.set_force_gray(true);
  gray.set_crop_size(2);
  const std::pair<TransformationParameter, Phase> sets[] = {
      {train, TRAIN}, {test, TEST}, {color, TRAIN}, {gray, TEST}};
  for (const auto& [param, phase] : sets) {
    transformers.push_back(std::make_unique<DataTransformer>(param, phase));
    transformers.back()->InitRand(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string what = "record fuzz";
  Datum datum;
  if (!fuzz::Expect(what, [&] {
        ParseDatum(std::string(reinterpret_cast<const char*>(data), size), &datum, what);
      }))
    return 0;
  for (auto& transformer : transformers) {
    fuzz::Expect("", [&] {
      std::vector<uint8_t> pixels;
      const DataTransformer::Image image = transformer->Decode(datum, &pixels, what);
      const std::vector<int> shape = transformer->ShapeOf(image, what);
      std::vector<float> out(static_cast<size_t>(shape[1]) * shape[2] * shape[3]);
      transformer->Transform(image, transformer->NextDraws(), out.data());
    });
    fuzz::Expect("", [&] {
      Blob blob(transformer->InferBlobShape(datum, what));
      transformer->Transform(datum, &blob, 0, what);
    });
  }
  return 0;
}
