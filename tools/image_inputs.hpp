#pragma once
// The image inputs of the verbs that run a deploy net on image files (classify, detect): which
// images (positional paths, --list, --dir), how each becomes the net's input (decode with OpenCV,
// resize, crop, mean, scale, channel swap: the flags defined in image_inputs.cpp), and the batch
// loop that loads them --batch at a time and runs the net.
#include <gflags/gflags.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "solvers/progress_line.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#endif

DECLARE_int32(batch);

namespace crema::cli {

struct Geometry {
  int channels = 3, height = 0, width = 0;
};

// How a decoded image becomes the net's input.
struct Preprocessing {
  Geometry input;
  int resize_height = 0, resize_width = 0;
  bool center_crop = false;
  int interpolation = 1;    // cv::INTER_LINEAR
  std::vector<float> mean;  // one per net channel (empty: none)
  double raw_scale = 255, scale = 1;
  std::vector<int> channel_swap;  // net channel -> decoded channel
};

// A deploy net that reads images: --model with each of --weights (which must hold some of its
// layers), for inference on --gpu, with its only input (N x C x H x W, else a ConfigError naming
// the model and `verb`) reshaped to --batch images.
struct ImageNet {
  std::unique_ptr<Net> net;
  Blob* input = nullptr;
  Preprocessing preprocessing;
  int batch = 1;
};
ImageNet LoadImageNet(const char* verb);
// --format csv (the default) or jsonl: whether JSON lines (ConfigError naming `verb` otherwise).
bool JsonLinesFromFlag(const char* verb);
// The --mean_*, --scale, --raw_scale, --channel_swap, --resize, --interpolation, --center_crop
// flags for a net input of `input` (ConfigError naming `verb` for what does not fit).
Preprocessing PreprocessingFromFlags(const Geometry& input, const char* verb);
// The images of the positional arguments, then --list, then --dir (ConfigError naming `verb`
// when there are none).
std::vector<std::string> ImagePaths(const std::vector<std::string>& args, const char* verb);

// One image as decoded, before any resizing (kept for the verbs that draw on it).
struct DecodedImage {
  int width = 0, height = 0;
#ifdef CREMA_WITH_OPENCV
  cv::Mat pixels;  // BGR, or gray for a 1-channel net
#endif
};

// One image a batch tried: its path, "" or why it could not be loaded, and (when asked) the image
// as decoded.
struct BatchImage {
  std::string path, error;
  DecodedImage decoded;
};

// Loads images of `paths` from `*next` on (advancing it) into `data` (batch x C x H x W, resized
// here) until `batch` of them loaded or none is left. Returns every image tried, in order; those
// without an error filled the first slots of `data`, in that order. `keep_decoded` keeps each
// image as decoded; else only its size.
std::vector<BatchImage> LoadBatch(const std::vector<std::string>& paths, size_t* next, int batch,
                                  const Preprocessing& preprocessing, bool keep_decoded,
                                  std::vector<float>* data);
// Runs the first `n` images of `data` through the net (reshaping its input to n images first
// when needed).
void ForwardImages(ImageNet* loaded, const std::vector<float>& data, int n);

// The progress of a run over `total` images, on stderr: a live count when stderr is a terminal
// and the results do not go to that terminal too (`results_to_stdout` with stdout a terminal);
// notes appear above it, or as plain lines without it.
class ImageProgress {
 public:
  ImageProgress(bool results_to_stdout, size_t total);
  void Note(const std::string& text);
  void Update(size_t done);
  void Finish();

 private:
  ProgressLine bar_{stderr};
  bool live_;
  size_t total_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// A CSV field, quoted as RFC 4180 when it holds a comma, quote or line break.
std::string CsvField(const std::string& text);

}  // namespace crema::cli
