#include "image_inputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "io/input_checks.hpp"
#include "io/npy.hpp"
#include "net/weights_match.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
static_assert(cv::INTER_NEAREST == 0 && cv::INTER_LINEAR == 1 && cv::INTER_CUBIC == 2 &&
              cv::INTER_AREA == 3);
#endif

DEFINE_string(mean_file, "",
              "classify, detect: a mean image (.binaryproto, or .npy C x H x W); its per-channel "
              "means are subtracted (Caffe's cpp_classification).");
DEFINE_string(mean_values, "",
              "classify, detect: per-channel means to subtract, in the net's channel order "
              "(B,G,R), or one value for all channels.");
DEFINE_double(scale, 1.0, "classify, detect: multiplies the pixels after the mean is subtracted.");
DEFINE_double(raw_scale, 255.0,
              "classify, detect: the pixel range before the mean is subtracted: 0-255 pixels are "
              "multiplied by raw_scale/255 (classify.py's raw_scale; 1 for nets trained on 0-1).");
DEFINE_string(channel_swap, "",
              "classify, detect: reorder the decoded BGR channels, e.g. 2,1,0 for nets trained on "
              "RGB (net channel i takes decoded channel swap[i]).");
DEFINE_int32(batch, 0,
             "classify, detect: images per forward pass (default: the net's input batch).");
DEFINE_string(resize, "",
              "classify: resize every image to WxH first (default: the net's input size); "
              "with --center_crop, then crop the input size from its centre.");
DEFINE_string(interpolation, "linear",
              "classify, detect: the resize filter: linear (bilinear, Caffe's "
              "cpp_classification), area (averages when shrinking, close to the anti-aliased "
              "resize of Caffe's Python classifier), cubic or nearest.");
DEFINE_bool(center_crop, false,
            "classify: crop the net's input size from the centre of the --resize'd "
            "image.");
DEFINE_string(list, "",
              "classify, detect: a file of image paths, one a line (a trailing integer label, as "
              "in convert-imageset lists, is ignored).");
DEFINE_string(dir, "", "classify, detect: every image file under this folder (sorted).");
DECLARE_string(format);

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

std::vector<float> FloatList(const std::string& flag, const std::string& text) {
  std::vector<float> values;
  for (const std::string& item : SplitList(text)) {
    try {
      size_t used = 0;
      values.push_back(std::stof(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      CREMA_THROW_CONFIG("--", flag, ": \"", item, "\" is not a number");
    }
  }
  return values;
}

// The per-channel means of a mean image (.binaryproto BlobProto or .npy).
std::vector<float> MeanFileChannels(const std::string& path, int channels) {
  std::vector<int64_t> shape;
  std::vector<double> values;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    NpyArray array = ReadNpy(path);
    shape = array.shape;
    values = std::move(array.values);
  } else {
    Blob blob;
    ReadBlobFromBinaryFile(path, &blob);
    shape.assign(blob.shape().begin(), blob.shape().end());
    for (int64_t i = 0; i < blob.count(); ++i) values.push_back(blob.data_at(i));
  }
  // N x C x H x W with N = 1, or C x H x W.
  if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
  if (shape.size() != 3 || shape[0] != channels)
    CREMA_THROW_CONFIG("--mean_file ", path, ": expected a 1 x ", channels,
                       " x H x W mean image for the net's ", channels, " channels");
  const int64_t plane = shape[1] * shape[2];
  std::vector<float> mean(channels);
  for (int c = 0; c < channels; ++c) {
    double sum = 0;
    for (int64_t i = 0; i < plane; ++i) sum += values[c * plane + i];
    mean[c] = static_cast<float>(sum / std::max<int64_t>(plane, 1));
  }
  return mean;
}

void ParseSize(const std::string& text, int* width, int* height) {
  const size_t x = text.find('x');
  try {
    size_t used_w = 0, used_h = 0;
    if (x == std::string::npos) throw std::invalid_argument(text);
    *width = std::stoi(text.substr(0, x), &used_w);
    *height = std::stoi(text.substr(x + 1), &used_h);
    if (used_w != x || used_h != text.size() - x - 1 || *width <= 0 || *height <= 0)
      throw std::invalid_argument(text);
  } catch (const std::exception&) {
    CREMA_THROW_CONFIG("--resize must be WxH with positive integers (e.g. 256x256), got \"", text,
                       "\"");
  }
}

#ifdef CREMA_WITH_OPENCV
// Decodes, resizes, crops and normalises one image into `out` (C x H x W); "" or the error.
std::string LoadImage(const std::string& path, const Preprocessing& p, float* out,
                      DecodedImage* decoded, bool keep_decoded) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "no such file";
  try {
    CheckImageFileSize(path, p.input.channels == 1 ? 1 : 3, "the image");
  } catch (const RuntimeError& e) {
    return e.what();
  }
  cv::Mat image;
  try {
    image = cv::imread(path, p.input.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    return "cannot decode the image: " + OneLineMessage(e.what());
  }
  if (image.empty()) return "cannot decode the image (unreadable or not an image)";
  decoded->width = image.cols;
  decoded->height = image.rows;
  if (keep_decoded) decoded->pixels = image;
  if (image.cols != p.resize_width || image.rows != p.resize_height) {
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(p.resize_width, p.resize_height), 0, 0, p.interpolation);
    image = resized;
  }
  if (p.center_crop) {
    const int x = (image.cols - p.input.width) / 2, y = (image.rows - p.input.height) / 2;
    image = image(cv::Rect(x, y, p.input.width, p.input.height));
  }
  const int channels = p.input.channels;
  const double raw = p.raw_scale / 255.0;
  for (int c = 0; c < channels; ++c) {
    const int source = p.channel_swap.empty() ? c : p.channel_swap[c];
    const double mean = p.mean.empty() ? 0.0 : p.mean[c];
    for (int h = 0; h < p.input.height; ++h) {
      const uint8_t* row = image.ptr<uint8_t>(h);
      for (int w = 0; w < p.input.width; ++w)
        out[(c * p.input.height + h) * p.input.width + w] =
            static_cast<float>((row[w * channels + source] * raw - mean) * p.scale);
    }
  }
  return "";
}
#else
std::string LoadImage(const std::string&, const Preprocessing&, float*, DecodedImage*, bool) {
  CREMA_THROW_RUNTIME("crema needs OpenCV to read images, and this build was made without it");
}
#endif

bool IsImageFile(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* known :
       {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".pbm", ".tif", ".tiff", ".webp", ".jp2"})
    if (ext == known) return true;
  return false;
}

}  // namespace

Preprocessing PreprocessingFromFlags(const Geometry& input, const char* verb) {
  Preprocessing p;
  p.input = input;
  if (input.channels != 1 && input.channels != 3)
    CREMA_THROW_CONFIG(verb, ": the net's input has ", input.channels,
                       " channels; images give 1 (gray) or 3 (BGR)");
  p.resize_width = input.width;
  p.resize_height = input.height;
  if (!FLAGS_resize.empty()) ParseSize(FLAGS_resize, &p.resize_width, &p.resize_height);
  p.center_crop = FLAGS_center_crop;
  const std::pair<const char*, int> filters[] = {
      {"nearest", 0}, {"linear", 1}, {"cubic", 2}, {"area", 3}};  // cv::INTER_* values
  p.interpolation = -1;
  for (const auto& [name, value] : filters)
    if (FLAGS_interpolation == name) p.interpolation = value;
  if (p.interpolation < 0)
    CREMA_THROW_CONFIG("--interpolation must be linear, area, cubic or nearest, got \"",
                       FLAGS_interpolation, "\"");
  const bool same = p.resize_width == input.width && p.resize_height == input.height;
  if (!same && !p.center_crop)
    CREMA_THROW_CONFIG("--resize ", FLAGS_resize, " differs from the net's input size ",
                       input.width, "x", input.height, ": add --center_crop to crop it");
  if (p.resize_width < input.width || p.resize_height < input.height)
    CREMA_THROW_CONFIG("--resize ", FLAGS_resize, " is smaller than the net's input size ",
                       input.width, "x", input.height, ", which --center_crop takes from it");
  if (!FLAGS_mean_file.empty() && !FLAGS_mean_values.empty())
    CREMA_THROW_CONFIG("give --mean_file or --mean_values, not both");
  if (!FLAGS_mean_values.empty()) {
    p.mean = FloatList("mean_values", FLAGS_mean_values);
    if (p.mean.size() == 1) p.mean.assign(input.channels, p.mean[0]);
    if (static_cast<int>(p.mean.size()) != input.channels)
      CREMA_THROW_CONFIG("--mean_values has ", p.mean.size(), " values but the net's input has ",
                         input.channels, " channels");
  }
  if (!FLAGS_mean_file.empty()) p.mean = MeanFileChannels(FLAGS_mean_file, input.channels);
  p.raw_scale = FLAGS_raw_scale;
  p.scale = FLAGS_scale;
  if (!FLAGS_channel_swap.empty()) {
    for (float v : FloatList("channel_swap", FLAGS_channel_swap)) {
      if (v != std::floor(v) || v < 0 || v >= input.channels)
        CREMA_THROW_CONFIG("--channel_swap: ", v, " is not a channel index below ", input.channels);
      p.channel_swap.push_back(static_cast<int>(v));
    }
    if (static_cast<int>(p.channel_swap.size()) != input.channels)
      CREMA_THROW_CONFIG("--channel_swap needs ", input.channels, " indices, got ",
                         p.channel_swap.size());
  }
  return p;
}

std::vector<std::string> ImagePaths(const std::vector<std::string>& args, const char* verb) {
  std::vector<std::string> paths = args;
  if (!FLAGS_list.empty()) {
    std::ifstream in(FLAGS_list);
    if (!in) CREMA_THROW_RUNTIME("cannot read --list ", FLAGS_list);
    const fs::path folder = fs::path(FLAGS_list).parent_path();
    std::string line;
    while (std::getline(in, line)) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      if (line.empty()) continue;
      // "path label" as in convert-imageset lists: drop the label.
      const size_t space = line.find_last_of(" \t");
      if (space != std::string::npos && space + 1 < line.size() &&
          line.find_first_not_of("-0123456789", space + 1) == std::string::npos)
        line = line.substr(0, line.find_last_not_of(" \t", space) + 1);
      // As given (relative to the working directory), unless it only exists beside the list.
      std::error_code ec;
      const fs::path beside = folder / line;
      if (!fs::exists(line, ec) && fs::path(line).is_relative() && fs::exists(beside, ec))
        line = beside.string();
      paths.push_back(line);
    }
  }
  if (!FLAGS_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(FLAGS_dir, ec))
      CREMA_THROW_RUNTIME("--dir ", FLAGS_dir, ": no such folder");
    std::vector<std::string> found;
    for (fs::recursive_directory_iterator it(FLAGS_dir, ec), end; !ec && it != end;
         it.increment(ec))
      if (it->is_regular_file(ec) && IsImageFile(it->path())) found.push_back(it->path().string());
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  if (paths.empty())
    CREMA_THROW_CONFIG(verb, ": no images (give paths, --list FILE or --dir FOLDER)");
  return paths;
}

ImageNet LoadImageNet(const char* verb) {
  if (FLAGS_batch < 0) CREMA_THROW_CONFIG("--batch must be positive, got ", FLAGS_batch);
  ImageNet loaded;
  loaded.net = Net::FromFile(FLAGS_model, TEST, 0, {}, DeviceFromFlags(),
                             MemoryPlanFromFlag(MemoryPlan::kInference));
  Net* net = loaded.net.get();
  net->SetFoldBatchNorm(FLAGS_fold_bn);
  for (const std::string& weights : SplitList(FLAGS_weights))
    CopyWeightsRequiringAMatch(net, weights);
  if (net->input_blobs().size() != 1 || net->input_blobs()[0]->num_axes() != 4)
    CREMA_THROW_CONFIG(FLAGS_model, ": ", verb,
                       " needs a net with one N x C x H x W input (an Input layer or "
                       "input/input_dim fields)");
  loaded.input = net->input_blobs()[0];
  const Geometry geometry{loaded.input->shape(1), loaded.input->shape(2), loaded.input->shape(3)};
  loaded.preprocessing = PreprocessingFromFlags(geometry, verb);
  loaded.batch = FLAGS_batch > 0 ? FLAGS_batch : std::max(1, loaded.input->shape(0));
  loaded.input->Reshape({loaded.batch, geometry.channels, geometry.height, geometry.width});
  net->Reshape();
  return loaded;
}

bool JsonLinesFromFlag(const char* verb) {
  gflags::CommandLineFlagInfo info;
  gflags::GetCommandLineFlagInfo("format", &info);
  const std::string format = info.is_default ? "csv" : FLAGS_format;
  if (format != "csv" && format != "jsonl")
    CREMA_THROW_CONFIG("--format must be csv or jsonl for ", verb, ", got \"", format, "\"");
  return format == "jsonl";
}

std::vector<BatchImage> LoadBatch(const std::vector<std::string>& paths, size_t* next, int batch,
                                  const Preprocessing& preprocessing, bool keep_decoded,
                                  std::vector<float>* data) {
  const int64_t image_size = static_cast<int64_t>(preprocessing.input.channels) *
                             preprocessing.input.height * preprocessing.input.width;
  data->resize(static_cast<size_t>(batch * image_size));
  std::vector<BatchImage> tried;
  int loaded = 0;
  while (*next < paths.size() && loaded < batch) {
    BatchImage image;
    image.path = paths[(*next)++];
    image.error = LoadImage(image.path, preprocessing, data->data() + loaded * image_size,
                            &image.decoded, keep_decoded);
    loaded += image.error.empty() ? 1 : 0;
    tried.push_back(std::move(image));
  }
  return tried;
}

void ForwardImages(ImageNet* loaded, const std::vector<float>& data, int n) {
  Net* net = loaded->net.get();
  Blob* input = loaded->input;
  if (input->shape(0) != n) {
    std::vector<int> shape = input->shape();
    shape[0] = n;
    input->Reshape(shape);
    net->Reshape();
  }
  std::copy(data.begin(), data.begin() + n * input->count(1), input->mutable_cpu_data<float>());
  net->Forward();
}

ImageProgress::ImageProgress(bool results_to_stdout, size_t total)
    : live_(isatty(STDERR_FILENO) && (!results_to_stdout || !isatty(STDOUT_FILENO))),
      total_(total) {}

void ImageProgress::Note(const std::string& text) {
  if (live_)
    bar_.Message(text);
  else
    std::fprintf(stderr, "%s\n", text.c_str());
}

void ImageProgress::Update(size_t done) {
  if (!live_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  bar_.Show(ProgressLine::FormatCount(static_cast<int64_t>(done), static_cast<int64_t>(total_),
                                      "images", done / std::max(1e-9, seconds), 24));
}

void ImageProgress::Finish() {
  if (live_) bar_.Finish();
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace crema::cli
