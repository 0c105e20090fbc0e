// crema classify: top-k classes of images with a deploy net and its weights, as Caffe's
// examples/cpp_classification (and python/classify.py for the resize-then-crop variant).
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "flags.hpp"
#include "image_inputs.hpp"
#include "net/net_json.hpp"
#include "verb.hpp"

DEFINE_string(labels, "", "classify: a label per class, one a line (synset_words.txt).");
DEFINE_int32(top_k, 5, "classify: how many classes to report per image.");
DECLARE_string(format);
DECLARE_string(out);

namespace crema::cli {
namespace {

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

// The class probabilities of each of the `n` images the net just ran on.
std::vector<std::vector<double>> Probabilities(const Blob& output, int n, bool apply_softmax) {
  std::vector<std::vector<double>> probs(n);
  const int64_t classes = output.count() / n;
  for (int i = 0; i < n; ++i) {
    std::vector<double>& scores = probs[i];
    scores.resize(classes);
    for (int64_t c = 0; c < classes; ++c) scores[c] = output.data_at(i * classes + c);
    if (!apply_softmax) continue;
    const double top = *std::max_element(scores.begin(), scores.end());
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - top));
    for (double& s : scores) s /= sum;
  }
  return probs;
}

int RunClassify(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  RequireFlag("weights", FLAGS_weights);
  const bool jsonl = JsonLinesFromFlag("classify");
  if (FLAGS_top_k < 1) CREMA_THROW_CONFIG("--top_k must be at least 1, got ", FLAGS_top_k);
  const std::vector<std::string> paths = ImagePaths(args, "classify");

  ImageNet loaded = LoadImageNet("classify");
  Net* net = loaded.net.get();

  const int output_id = OutputBlob(*net);
  const std::string& output_name = net->blob_names()[output_id];
  const std::vector<std::string> labels = ReadLabels(FLAGS_labels);
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
  ImageProgress progress(out == stdout, paths.size());
  if (apply_softmax)
    progress.Note("classify: the output \"" + output_name + "\" comes from a " +
                  (producer ? std::string(producer->type()) : std::string("?")) +
                  " layer, not Softmax: applying softmax to turn it into probabilities");
  ResultWriter writer(out, jsonl, labels);

  int failed = 0;
  size_t next = 0;
  std::vector<float> data;
  while (next < paths.size()) {
    const std::vector<BatchImage> tried =
        LoadBatch(paths, &next, loaded.batch, loaded.preprocessing, /*keep_decoded=*/false, &data);
    int n = 0;
    for (const BatchImage& image : tried) n += image.error.empty() ? 1 : 0;
    failed += static_cast<int>(tried.size()) - n;
    std::vector<std::vector<double>> probs;
    if (n > 0) {
      ForwardImages(&loaded, data, n);
      probs = Probabilities(output, n, apply_softmax);
    }
    int loaded = 0;
    for (const BatchImage& image : tried) {
      if (image.error.empty())
        writer.Top(image.path, probs[loaded++], FLAGS_top_k);
      else
        writer.Error(image.path, image.error);
    }
    progress.Update(next);
  }
  progress.Finish();
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
