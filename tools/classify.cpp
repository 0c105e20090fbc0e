// crema classify: top-k classes of images with a deploy net and its weights, as Caffe's
// examples/cpp_classification (and python/classify.py for the resize-then-crop variant).
#include <gflags/gflags.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "io/data_transformer.hpp"
#include "io/npy.hpp"
#include "net/net_json.hpp"
#include "net/weights_match.hpp"
#include "solvers/progress_line.hpp"
#include "verb.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
static_assert(cv::INTER_NEAREST == 0 && cv::INTER_LINEAR == 1 && cv::INTER_CUBIC == 2 &&
              cv::INTER_AREA == 3);
#endif

DEFINE_string(mean_file, "",
              "classify: a mean image (.binaryproto, or .npy C x H x W); its per-channel means "
              "are subtracted (Caffe's cpp_classification).");
DEFINE_string(mean_values, "",
              "classify: per-channel means to subtract, in the net's channel order (B,G,R), or "
              "one value for all channels.");
DEFINE_double(scale, 1.0, "classify: multiplies the pixels after the mean is subtracted.");
DEFINE_double(raw_scale, 255.0,
              "classify: the pixel range before the mean is subtracted: 0-255 pixels are "
              "multiplied by raw_scale/255 (classify.py's raw_scale; 1 for nets trained on 0-1).");
DEFINE_string(channel_swap, "",
              "classify: reorder the decoded BGR channels, e.g. 2,1,0 for nets trained on RGB "
              "(net channel i takes decoded channel swap[i]).");
DEFINE_string(labels, "", "classify: a label per class, one a line (synset_words.txt).");
DEFINE_int32(top_k, 5, "classify: how many classes to report per image.");
DEFINE_int32(batch, 0, "classify: images per forward pass (default: the net's input batch).");
DEFINE_string(resize, "",
              "classify: resize every image to WxH first (default: the net's input size); with "
              "--center_crop, then crop the input size from its centre.");
DEFINE_string(interpolation, "linear",
              "classify: the resize filter: linear (bilinear, Caffe's cpp_classification), area "
              "(averages when shrinking, close to the anti-aliased resize of Caffe's Python "
              "classifier), cubic or nearest.");
DEFINE_bool(center_crop, false,
            "classify: crop the net's input size from the centre of the --resize'd image.");
DEFINE_string(list, "",
              "classify: a file of image paths, one a line (a trailing integer label, as in "
              "convert-imageset lists, is ignored).");
DEFINE_string(dir, "", "classify: classify every image file under this folder (sorted).");
DECLARE_string(format);
DECLARE_string(out);

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

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

Preprocessing PreprocessingFromFlags(const Geometry& input) {
  Preprocessing p;
  p.input = input;
  if (input.channels != 1 && input.channels != 3)
    CREMA_THROW_CONFIG("classify: the net's input has ", input.channels,
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

#ifdef CREMA_WITH_OPENCV
// Decodes, resizes, crops and normalises one image into `out` (C x H x W); "" or the error.
std::string LoadImage(const std::string& path, const Preprocessing& p, float* out) {
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
std::string LoadImage(const std::string&, const Preprocessing&, float*) {
  CREMA_THROW_RUNTIME("crema classify needs OpenCV, which this build of crema was made without");
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

// The images of the positional arguments, then --list, then --dir.
std::vector<std::string> ImagePaths(const std::vector<std::string>& args) {
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
    CREMA_THROW_CONFIG("classify: no images (give paths, --list FILE or --dir FOLDER)");
  return paths;
}

std::vector<std::string> ReadLabels(const std::string& path) {
  std::vector<std::string> labels;
  if (path.empty()) return labels;
  std::ifstream in(path);
  if (!in) CREMA_THROW_RUNTIME("cannot read --labels ", path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();
  return labels;
}

// The blob classified: the net's only output, else the first top of the last layer.
int OutputBlob(const Net& net) {
  if (net.output_blob_indices().size() == 1) return net.output_blob_indices()[0];
  return net.top_id_vec(net.num_layers() - 1)[0];
}

// The layer that computes blob `blob_id`, looking through layers that only reshape.
const Layer* Producer(const Net& net, int blob_id) {
  for (int i = net.num_layers() - 1; i >= 0; --i) {
    const auto& tops = net.top_id_vec(i);
    if (std::find(tops.begin(), tops.end(), blob_id) == tops.end()) continue;
    const std::string type = net.layers()[i]->type();
    if ((type == "Flatten" || type == "Reshape" || type == "Split") && !net.bottom_ids(i).empty() &&
        net.bottom_ids(i)[0] != blob_id)
      return Producer(net, net.bottom_ids(i)[0]);
    return net.layers()[i].get();
  }
  return nullptr;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

class ResultWriter {
 public:
  ResultWriter(std::FILE* out, bool jsonl, const std::vector<std::string>& labels)
      : out_(out), jsonl_(jsonl), labels_(labels) {
    if (!jsonl_) std::fprintf(out_, "path,rank,class,label,prob,error\n");
  }
  void Error(const std::string& path, const std::string& error) {
    if (jsonl_)
      std::fprintf(out_, "{\"path\": %s, \"error\": %s}\n", JsonQuote(path).c_str(),
                   JsonQuote(error).c_str());
    else
      std::fprintf(out_, "%s,,,,,%s\n", CsvField(path).c_str(), CsvField(error).c_str());
    std::fflush(out_);
  }
  // `probs` has one value per class.
  void Top(const std::string& path, const std::vector<double>& probs, int k) {
    std::vector<int> order(probs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    k = std::min<int>(k, static_cast<int>(order.size()));
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    });
    std::string line = jsonl_ ? "{\"path\": " + JsonQuote(path) + ", \"top\": [" : "";
    for (int r = 0; r < k; ++r) {
      const int c = order[r];
      const std::string label = c < static_cast<int>(labels_.size()) ? labels_[c] : "";
      char prob[32];
      std::snprintf(prob, sizeof(prob), "%.6g", probs[c]);
      if (jsonl_) {
        line += (r ? ", " : "") + std::string("{\"rank\": ") + std::to_string(r + 1) +
                ", \"class\": " + std::to_string(c) + ", \"label\": " + JsonQuote(label) +
                ", \"prob\": " + prob + "}";
      } else {
        line += CsvField(path) + "," + std::to_string(r + 1) + "," + std::to_string(c) + "," +
                CsvField(label) + "," + prob + ",\n";
      }
    }
    if (jsonl_) line += "]}\n";
    std::fputs(line.c_str(), out_);
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool jsonl_;
  const std::vector<std::string>& labels_;
};

// Runs the first `n` images of `data` through the net; the class probabilities of each.
void Classify(Net* net, Blob* input, const std::vector<float>& data, int n, bool apply_softmax,
              const Blob& output, std::vector<std::vector<double>>* probs) {
  if (input->shape(0) != n) {
    std::vector<int> shape = input->shape();
    shape[0] = n;
    input->Reshape(shape);
    net->Reshape();
  }
  std::copy(data.begin(), data.begin() + n * input->count(1), input->mutable_cpu_data<float>());
  net->Forward();
  const int64_t classes = output.count() / n;
  for (int i = 0; i < n; ++i) {
    std::vector<double>& scores = (*probs)[i];
    scores.resize(classes);
    for (int64_t c = 0; c < classes; ++c) scores[c] = output.data_at(i * classes + c);
    if (!apply_softmax) continue;
    const double top = *std::max_element(scores.begin(), scores.end());
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - top));
    for (double& s : scores) s /= sum;
  }
}

int RunClassify(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  RequireFlag("weights", FLAGS_weights);
  gflags::CommandLineFlagInfo format_info;
  gflags::GetCommandLineFlagInfo("format", &format_info);
  const std::string format = format_info.is_default ? "csv" : FLAGS_format;
  if (format != "csv" && format != "jsonl")
    CREMA_THROW_CONFIG("--format must be csv or jsonl for classify, got \"", format, "\"");
  if (FLAGS_top_k < 1) CREMA_THROW_CONFIG("--top_k must be at least 1, got ", FLAGS_top_k);
  if (FLAGS_batch < 0) CREMA_THROW_CONFIG("--batch must be positive, got ", FLAGS_batch);
  const std::vector<std::string> paths = ImagePaths(args);

  std::unique_ptr<Net> net = Net::FromFile(FLAGS_model, TEST, 0, {}, DeviceFromFlags(),
                                           MemoryPlanFromFlag(MemoryPlan::kInference));
  net->SetFoldBatchNorm(FLAGS_fold_bn);
  for (const std::string& weights : SplitList(FLAGS_weights))
    CopyWeightsRequiringAMatch(net.get(), weights);
  if (net->input_blobs().size() != 1 || net->input_blobs()[0]->num_axes() != 4)
    CREMA_THROW_CONFIG(FLAGS_model,
                       ": classify needs a net with one N x C x H x W input (an "
                       "Input layer or input/input_dim fields)");
  Blob* input = net->input_blobs()[0];
  const Geometry geometry{input->shape(1), input->shape(2), input->shape(3)};
  const Preprocessing preprocessing = PreprocessingFromFlags(geometry);
  const int batch = FLAGS_batch > 0 ? FLAGS_batch : std::max(1, input->shape(0));

  const int output_id = OutputBlob(*net);
  const std::string& output_name = net->blob_names()[output_id];
  const std::vector<std::string> labels = ReadLabels(FLAGS_labels);
  input->Reshape({batch, geometry.channels, geometry.height, geometry.width});
  net->Reshape();
  const Blob& output = *net->blobs()[output_id];
  const int classes = static_cast<int>(output.count() / std::max(1, output.shape(0)));
  if (!labels.empty() && static_cast<int>(labels.size()) != classes)
    CREMA_THROW_CONFIG("--labels ", FLAGS_labels, " has ", labels.size(), " labels but the net's ",
                       "output \"", output_name, "\" has ", classes, " classes");
  const Layer* producer = Producer(*net, output_id);
  const bool apply_softmax = producer == nullptr || std::string(producer->type()) != "Softmax";

  std::FILE* out = stdout;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(nullptr, &std::fclose);
  if (!FLAGS_out.empty()) {
    file.reset(std::fopen(FLAGS_out.c_str(), "w"));
    if (!file) CREMA_THROW_RUNTIME("cannot write --out ", FLAGS_out);
    out = file.get();
  }
  const bool progress = isatty(STDERR_FILENO) && (out != stdout || !isatty(STDOUT_FILENO));
  ProgressLine bar(stderr);
  const auto started = std::chrono::steady_clock::now();
  auto note = [&](const std::string& text) {
    if (progress)
      bar.Message(text);
    else
      std::fprintf(stderr, "%s\n", text.c_str());
  };
  if (apply_softmax)
    note("classify: the output \"" + output_name + "\" comes from a " +
         (producer ? std::string(producer->type()) : std::string("?")) +
         " layer, not Softmax: applying softmax to turn it into probabilities");
  ResultWriter writer(out, format == "jsonl", labels);

  int failed = 0;
  size_t next = 0;
  const int64_t image_size = input->count(1);
  std::vector<std::string> batch_paths;  // the images of the batch that loaded
  while (next < paths.size()) {
    // A batch of the next images that load; the rows (path, error) stay in input order.
    std::vector<std::pair<std::string, std::string>> rows;
    batch_paths.clear();
    std::vector<float> data(static_cast<size_t>(batch * image_size));
    while (next < paths.size() && static_cast<int>(batch_paths.size()) < batch) {
      const std::string& path = paths[next++];
      const std::string error =
          LoadImage(path, preprocessing, data.data() + batch_paths.size() * image_size);
      if (error.empty()) batch_paths.push_back(path);
      failed += error.empty() ? 0 : 1;
      rows.emplace_back(path, error);
    }
    const int n = static_cast<int>(batch_paths.size());
    std::vector<std::vector<double>> probs(n);
    if (n > 0) Classify(net.get(), input, data, n, apply_softmax, output, &probs);
    int image = 0;
    for (const auto& [path, error] : rows) {
      if (error.empty())
        writer.Top(path, probs[image++], FLAGS_top_k);
      else
        writer.Error(path, error);
    }
    if (progress)
      bar.Show(ProgressLine::FormatCount(
          static_cast<int64_t>(next), static_cast<int64_t>(paths.size()), "images",
          next / std::max(1e-9,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                              .count()),
          24));
  }
  if (progress) bar.Finish();
  if (failed > 0)
    CREMA_THROW_RUNTIME(failed, " of ", paths.size(),
                        " image(s) could not be classified (see their error rows)");
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    classify, "classify", "top-k classes of images with a deploy net and its weights",
    "crema classify --model DEPLOY.prototxt --weights W.caffemodel [--mean_file F | "
    "--mean_values B,G,R] [--scale S] [--raw_scale R] [--channel_swap 2,1,0] [--labels FILE] "
    "[--interpolation linear|area|cubic|nearest] "
    "[--top_k 5] [--batch N] [--gpu ID] [--resize WxH [--center_crop]] [--format csv|jsonl] "
    "[--out FILE] IMAGES... | --list FILE | --dir FOLDER\n\n"
    "Each image is decoded with OpenCV as BGR (gray for a 1-channel net), as Caffe, then by "
    "default resized (bilinear; --interpolation area is closer to the anti-aliased resize of "
    "Caffe's Python tools when shrinking) to the net's input size, as Caffe's "
    "cpp_classification. "
    "--resize 256x256 --center_crop instead resizes to 256x256 and crops the input size from "
    "the centre, as Caffe's classify.py and the ImageNet models' test phase. Then, per pixel: "
    "value = (pixel * raw_scale / 255 - mean[channel]) * scale, in the net's channel order "
    "(after --channel_swap). A --mean_file contributes its per-channel means (as "
    "cpp_classification), whatever its size. Images go through the net --batch at a time; "
    "when the output does not come from a Softmax layer (e.g. SqueezeNet ends at global "
    "pooling) softmax is applied, and that is said once on stderr.\n\n"
    "Output (stdout, or --out): CSV with one row per image and rank, header "
    "path,rank,class,label,prob,error (class: the output index; label: its line of --labels; "
    "fields quoted as RFC 4180), or JSON lines {\"path\": P, \"top\": [{\"rank\": 1, \"class\": "
    "C, \"label\": L, \"prob\": p}, ...]}. An image that cannot be read gets one row with its "
    "error (CSV: path and error only; JSON: {\"path\": P, \"error\": E}), the others go on, and "
    "the exit code is 1 at the end. On a terminal a progress bar is drawn on stderr.",
    {"memory_plan",  "model",  "weights", "mean_file", "mean_values", "scale",   "raw_scale",
     "channel_swap", "labels", "top_k",   "batch",     "gpu",         "resize",  "interpolation",
     "center_crop",  "format", "out",     "list",      "dir",         "fold_bn", "amp"},
    &crema::cli::RunClassify);
