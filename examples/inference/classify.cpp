// crema-classify: loads a deploy net and its weights with libcrema_infer, feeds one input and
// prints the top classes of the net's (first) output.
//
//   crema-classify DEPLOY.prototxt WEIGHTS.caffemodel INPUT [LABELS.txt] [TOP_K]
//
// INPUT is an image file when built with OpenCV (resized to the input's H x W, BGR, minus the
// mean given by CREMA_MEAN="104,117,123", times CREMA_SCALE), else raw float32 values in the
// input blob's C x H x W order (numpy: array.astype('float32').tofile(path)). LABELS has one
// class name per line. Exit 0 on success, 2 on a configuration error, 1 on any other error.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace {

// A number given on the command line or in the environment: ConfigError naming `what` unless
// all of `text` is one.
double ParseNumber(const std::string& what, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    throw crema::ConfigError(what + ": \"" + text + "\" is not a number");
  return value;
}

#ifdef CREMA_WITH_OPENCV
std::vector<float> ParseList(const char* text) {
  std::vector<float> values;
  std::stringstream in(text == nullptr ? "" : text);
  std::string item;
  while (std::getline(in, item, ','))
    values.push_back(static_cast<float>(ParseNumber("CREMA_MEAN", item)));
  return values;
}
#endif

// Fills the (1, C, H, W) input blob from `path`.
void LoadInput(const std::string& path, crema::Blob* input) {
  float* data = input->mutable_cpu_data<float>();
#ifdef CREMA_WITH_OPENCV
  const int channels = input->shape(1), height = input->shape(2), width = input->shape(3);
  cv::Mat image = cv::imread(path, channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  if (image.empty()) throw crema::RuntimeError(path + ": cannot read the image");
  cv::resize(image, image, cv::Size(width, height));
  image.convertTo(image, CV_32F);
  const std::vector<float> mean = ParseList(std::getenv("CREMA_MEAN"));
  const char* scale_text = std::getenv("CREMA_SCALE");
  const float scale =
      scale_text == nullptr ? 1.f : static_cast<float>(ParseNumber("CREMA_SCALE", scale_text));
  for (int c = 0; c < channels; ++c)
    for (int h = 0; h < height; ++h)
      for (int w = 0; w < width; ++w) {
        const float m = mean.empty() ? 0.f : mean[std::min<size_t>(c, mean.size() - 1)];
        data[(c * height + h) * width + w] = (image.ptr<float>(h)[w * channels + c] - m) * scale;
      }
#else
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw crema::RuntimeError(path + ": cannot open the input");
  const std::streamsize bytes = in.tellg();
  if (bytes != static_cast<std::streamsize>(input->count() * sizeof(float)))
    throw crema::ConfigError(path + ": " + std::to_string(bytes) + " bytes, the input needs " +
                             std::to_string(input->count()) + " float32 values (C x H x W)");
  in.seekg(0);
  in.read(reinterpret_cast<char*>(data), bytes);
#endif
}

int Run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s DEPLOY.prototxt WEIGHTS.caffemodel INPUT [LABELS.txt] [TOP_K]\n",
                 argv[0]);
    return 2;
  }
  std::unique_ptr<crema::Net> net = crema::Net::FromFile(argv[1], crema::TEST);
  net->CopyTrainedLayersFrom(argv[2]);
  crema::Blob* input = net->input_blobs().at(0);
  std::vector<int> shape = input->shape();
  if (shape.size() != 4) throw crema::ConfigError("the net's input must be 4-D (N, C, H, W)");
  shape[0] = 1;  // one input: batch 1
  input->Reshape(shape);
  net->Reshape();
  LoadInput(argv[3], input);
  net->Forward();

  const crema::Blob& output = *net->output_blobs().at(0);
  const float* scores = output.cpu_data<float>();
  const int classes = static_cast<int>(output.count());
  std::vector<std::string> labels;
  if (argc > 4) {
    std::ifstream in(argv[4]);
    if (!in) throw crema::RuntimeError(std::string(argv[4]) + ": cannot open the labels");
    for (std::string line; std::getline(in, line);) labels.push_back(line);
  }
  int top_k = 5;
  if (argc > 5) {
    const double k = ParseNumber("TOP_K", argv[5]);
    if (!(k >= 1 && k <= 1e9) || k != std::floor(k))
      throw crema::ConfigError(std::string("TOP_K: \"") + argv[5] +
                               "\" is not a whole number >= 1");
    top_k = static_cast<int>(k);
  }
  top_k = std::min(classes, top_k);
  std::vector<int> order(classes);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                    [&](int a, int b) { return scores[a] > scores[b]; });
  for (int i = 0; i < top_k; ++i) {
    const int c = order[i];
    std::printf("%.6f %d %s\n", scores[c], c,
                c < static_cast<int>(labels.size()) ? labels[c].c_str() : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const crema::ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
