// Image bytes -> the OpenCV decoding the data layers use: an encoded Datum through
// DataTransformer::Decode + Transform (Data layer), and the file read + resize of ImageData and
// WindowData (cv::imread of a file, colour and grey, resized to 5 x 7).
#include <memory>
#include <string>
#include <vector>

#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "io/data_transformer.hpp"
#include "io/input_checks.hpp"
#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace {
std::unique_ptr<crema::DataTransformer> transformer;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  crema::fuzz::Init();
  crema::TransformationParameter param;
  param.set_mirror(true);
  param.set_scale(0.25f);
  transformer = std::make_unique<crema::DataTransformer>(param, crema::TRAIN);
  transformer->InitRand(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crema;
  const std::string what = "image fuzz";
  Datum datum;
  datum.set_encoded(true);
  datum.set_data(data, size);
  fuzz::Expect(what, [&] {
    std::vector<uint8_t> pixels;
    const DataTransformer::Image image = transformer->Decode(datum, &pixels, what);
    const std::vector<int> shape = transformer->ShapeOf(image, what);
    std::vector<float> out(static_cast<size_t>(shape[1]) * shape[2] * shape[3]);
    transformer->Transform(image, transformer->NextDraws(), out.data());
  });
#ifdef CREMA_WITH_OPENCV
  const std::string path = fuzz::WriteFile("fuzz.img", data, size);
  for (int flag : {cv::IMREAD_COLOR, cv::IMREAD_GRAYSCALE}) {
    if (!fuzz::Expect(path, [&] {
          CheckImageFileSize(path, flag == cv::IMREAD_COLOR ? 3 : 1, "image '" + path + "'");
        }))
      continue;
    try {
      cv::Mat image = cv::imread(path, flag);
      if (!image.empty()) {
        cv::Mat resized;
        cv::resize(image, resized, cv::Size(7, 5));
      }
    } catch (const cv::Exception&) {
      // The layers turn this into a RuntimeError naming the image.
    }
  }
#endif
  return 0;
}
