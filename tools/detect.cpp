// crema detect: the boxes an SSD-style deploy net finds in images (its DetectionOutput), in pixel
// coordinates of each image as given, as CSV or JSON lines, and optionally drawn onto copies of
// the images (SSD's examples/ssd/ssd_detect.cpp and ssd_detect.ipynb).
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "image_inputs.hpp"
#include "io/input_checks.hpp"
#include "io/json.hpp"
#include "io/label_map.hpp"
#include "staging.hpp"
#include "verb.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

DEFINE_string(labelmap, "",
              "detect: an SSD label map (labelmap_voc.prototxt: item { name label display_name "
              "}) naming the classes; without it class names are empty (drawn as the label "
              "number).");
DEFINE_double(threshold, 0.5, "detect: keep the boxes whose score is at least this (0 to 1).");
DEFINE_string(draw, "",
              "detect: a folder (created when missing) that receives a copy of each image with "
              "its boxes drawn, under the image's file name; existing files are not overwritten.");
DECLARE_string(format);
DECLARE_string(out);

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

// One kept box, in pixels of the image as decoded.
struct Detection {
  int label = 0;
  double score = 0;
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// --out; "" for stdout.
std::string OutputPath() {
  const std::string path = FLAGS_out;
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec))
    CREMA_THROW_RUNTIME("cannot write --out ", path, ": no folder ", folder.string());
  if (fs::is_directory(path, ec))
    CREMA_THROW_CONFIG("--out ", path, " is a folder; give a file name");
  return path;
}

// The file names the drawn images get (each image's own); ConfigError when two images share one
// or OpenCV cannot write that kind of file.
std::vector<std::string> DrawNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  std::map<std::string, std::string> first;
  for (const std::string& path : paths) {
    const std::string name = fs::path(path).filename().string();
    const auto [at, added] = first.emplace(name, path);
    if (!added)
      CREMA_THROW_CONFIG("--draw: the images ", at->second, " and ", path,
                         " have the same file name, which would be drawn to the same file");
#ifdef CREMA_WITH_OPENCV
    if (!cv::haveImageWriter(name))
      CREMA_THROW_CONFIG("--draw: OpenCV cannot write an image named ", name,
                         " (give images with a .jpg, .png, .bmp, ... extension)");
#endif
    names.push_back(name);
  }
  return names;
}

std::string Shape(const Blob& blob) {
  std::string text;
  for (int axis = 0; axis < blob.num_axes(); ++axis)
    text += (axis ? " x " : "") + std::to_string(blob.shape(axis));
  return text;
}

// The net's detection output: an output blob of rows of 7 (image_id, label, score, xmin, ymin,
// xmax, ymax), the one a DetectionOutput layer computes when there are several.
int DetectionBlob(const Net& net) {
  std::optional<int> found;
  std::string outputs;
  for (int id : net.output_blob_indices()) {
    const Blob& blob = *net.blobs()[id];
    outputs +=
        (outputs.empty() ? "\"" : ", \"") + net.blob_names()[id] + "\" (" + Shape(blob) + ")";
    if (blob.num_axes() < 2 || blob.shape(blob.num_axes() - 1) != 7) continue;
    bool from_detection_output = false;
    for (int i = 0; i < net.num_layers(); ++i) {
      const auto& tops = net.top_id_vec(i);
      if (std::find(tops.begin(), tops.end(), id) != tops.end())
        from_detection_output = std::string(net.layers()[i]->type()) == "DetectionOutput";
    }
    if (!found || from_detection_output) found = id;
    if (from_detection_output) break;
  }
  if (!found)
    CREMA_THROW_CONFIG(FLAGS_model, ": net \"", net.name(),
                       "\" has no detection output (rows of 7: image_id, label, score, xmin, "
                       "ymin, xmax, ymax, as a DetectionOutput layer computes); its outputs: ",
                       outputs);
  return *found;
}

// The boxes of image `image` in the detection rows, with a score >= threshold, scaled to its
// `width` x `height` pixels and clipped to them.
std::vector<Detection> ImageDetections(const Blob& rows, int image, int width, int height,
                                       double threshold) {
  std::vector<Detection> found;
  const int64_t count = rows.count() / 7;
  for (int64_t r = 0; r < count; ++r) {
    double row[7];
    for (int j = 0; j < 7; ++j) row[j] = rows.data_at(r * 7 + j);
    // Labels below 0 are SSD's placeholder rows of an image without boxes.
    if (static_cast<int>(row[0]) != image || row[1] < 0 || !(row[2] >= threshold)) continue;
    Detection d;
    d.label = static_cast<int>(std::lround(row[1]));
    d.score = row[2];
    d.x1 = std::clamp(row[3] * width, 0.0, static_cast<double>(width));
    d.y1 = std::clamp(row[4] * height, 0.0, static_cast<double>(height));
    d.x2 = std::clamp(row[5] * width, 0.0, static_cast<double>(width));
    d.y2 = std::clamp(row[6] * height, 0.0, static_cast<double>(height));
    found.push_back(d);
  }
  return found;
}

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// One line per box: CSV image,class_id,class_name,score,x1,y1,x2,y2 or a JSON object.
std::string ResultLines(const std::string& path, const std::vector<Detection>& boxes,
                        const std::map<int, std::string>& names, bool jsonl) {
  std::string lines;
  for (const Detection& d : boxes) {
    const auto name = names.find(d.label);
    const std::string class_name = name == names.end() ? "" : name->second;
    const std::string score = Format("%.6g", d.score);
    const std::string x1 = Format("%.2f", d.x1), y1 = Format("%.2f", d.y1),
                      x2 = Format("%.2f", d.x2), y2 = Format("%.2f", d.y2);
    if (jsonl)
      lines += "{\"image\": " + JsonQuote(path) + ", \"class_id\": " + std::to_string(d.label) +
               ", \"class\": " + JsonQuote(class_name) + ", \"score\": " + score + ", \"box\": [" +
               x1 + ", " + y1 + ", " + x2 + ", " + y2 + "]}\n";
    else
      lines += CsvField(path) + "," + std::to_string(d.label) + "," + CsvField(class_name) + "," +
               score + "," + x1 + "," + y1 + "," + x2 + "," + y2 + "\n";
  }
  return lines;
}

#ifdef CREMA_WITH_OPENCV
// Tableau 10, as BGR: class c is drawn in kPalette[c % 10].
const cv::Scalar kPalette[10] = {{180, 119, 31},  {14, 127, 255}, {44, 160, 44},   {40, 39, 214},
                                 {189, 103, 148}, {75, 86, 140},  {194, 119, 227}, {127, 127, 127},
                                 {34, 189, 188},  {207, 190, 23}};

// Each box as a rectangle in its class's colour, with "name score" on a band of that colour
// above it (inside it when there is no room above).
void DrawDetections(const std::vector<Detection>& boxes, const std::map<int, std::string>& names,
                    cv::Mat* image) {
  if (image->channels() == 1) cv::cvtColor(*image, *image, cv::COLOR_GRAY2BGR);
  const int width = image->cols, height = image->rows;
  const int line = std::max(1, static_cast<int>(std::lround(std::min(width, height) / 300.0)));
  const double font_scale = std::max(0.35, std::min(width, height) / 1000.0);
  auto corner = [](double v, int size) {
    return std::clamp(static_cast<int>(std::lround(v)), 0, size - 1);
  };
  for (const Detection& d : boxes) {
    const cv::Scalar colour = kPalette[((d.label % 10) + 10) % 10];
    const cv::Point top_left(corner(d.x1, width), corner(d.y1, height));
    const cv::Point bottom_right(corner(d.x2 - 1, width), corner(d.y2 - 1, height));
    cv::rectangle(*image, top_left, bottom_right, colour, line);
  }
  for (const Detection& d : boxes) {
    const cv::Scalar colour = kPalette[((d.label % 10) + 10) % 10];
    const auto name = names.find(d.label);
    const std::string text =
        (name == names.end() ? std::to_string(d.label) : name->second) + Format(" %.2f", d.score);
    int baseline = 0;
    const cv::Size size = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, font_scale, 1, &baseline);
    const int band = size.height + baseline + 2;
    int x = corner(d.x1, width), y = corner(d.y1, height) - band;
    if (y < 0) y = corner(d.y1, height);
    x = std::max(0, std::min(x, width - size.width - 2));
    cv::rectangle(*image, cv::Rect(x, y, size.width + 2, band), colour, cv::FILLED);
    const double luma = 0.114 * colour[0] + 0.587 * colour[1] + 0.299 * colour[2];
    cv::putText(*image, text, cv::Point(x + 1, y + size.height + 1), cv::FONT_HERSHEY_SIMPLEX,
                font_scale, luma > 150 ? cv::Scalar(0, 0, 0) : cv::Scalar(255, 255, 255), 1,
                cv::LINE_AA);
  }
}

void WriteDrawn(const std::string& path, const cv::Mat& image) {
  bool written = false;
  try {
    written = cv::imwrite(path, image);
  } catch (const cv::Exception& e) {
    CREMA_THROW_RUNTIME("--draw: cannot write ", path, ": ", OneLineMessage(e.what()));
  }
  if (!written) CREMA_THROW_RUNTIME("--draw: cannot write ", path);
}
#endif

int RunDetect(const std::vector<std::string>& args) {
#ifndef CREMA_WITH_OPENCV
  CREMA_THROW_RUNTIME("crema detect needs OpenCV, which this build of crema was made without");
#endif
  RequireFlag("model", FLAGS_model);
  RequireFlag("weights", FLAGS_weights);
  const bool jsonl = JsonLinesFromFlag("detect");
  if (!(FLAGS_threshold >= 0 && FLAGS_threshold <= 1))
    CREMA_THROW_CONFIG("--threshold must be between 0 and 1 (a score), got ", FLAGS_threshold);
  const std::string output_path = OutputPath();
  const std::vector<std::string> paths = ImagePaths(args, "detect");
  const std::vector<std::string> draw_names =
      FLAGS_draw.empty() ? std::vector<std::string>() : DrawNames(paths);
  std::map<int, std::string> names;
  if (!FLAGS_labelmap.empty()) names = DisplayNamesByLabel(ReadLabelMap(FLAGS_labelmap));

  ImageNet loaded = LoadImageNet("detect");
  const Blob& rows = *loaded.net->blobs()[DetectionBlob(*loaded.net)];
  // Drawn images and the results appear whole at the end, or not at all.
  std::unique_ptr<StagingDir> drawn;
  if (!FLAGS_draw.empty()) drawn = std::make_unique<StagingDir>(FLAGS_draw, draw_names);
  ImageProgress progress(output_path.empty(), paths.size());
  std::string results = jsonl ? "" : "image,class_id,class_name,score,x1,y1,x2,y2\n";
  std::set<int> unnamed;
  int failed = 0;
  size_t next = 0;
  std::vector<float> data;
  while (next < paths.size()) {
    const std::vector<BatchImage> tried =
        LoadBatch(paths, &next, loaded.batch, loaded.preprocessing, drawn != nullptr, &data);
    for (const BatchImage& image : tried)
      if (!image.error.empty()) progress.Note("detect: " + image.path + ": " + image.error);
    for (const BatchImage& image : tried) failed += image.error.empty() ? 0 : 1;
    // After a failure only the remaining images are read, to report every one that fails.
    if (failed > 0) continue;
    ForwardImages(&loaded, data, static_cast<int>(tried.size()));
    for (size_t i = 0; i < tried.size(); ++i) {
      const DecodedImage& decoded = tried[i].decoded;
      const std::vector<Detection> boxes = ImageDetections(rows, static_cast<int>(i), decoded.width,
                                                           decoded.height, FLAGS_threshold);
      for (const Detection& d : boxes)
        if (!names.empty() && !names.count(d.label) && unnamed.insert(d.label).second)
          progress.Note("detect: label " + std::to_string(d.label) + " is not in --labelmap " +
                        FLAGS_labelmap + "; its class name is left empty");
      results += ResultLines(tried[i].path, boxes, names, jsonl);
#ifdef CREMA_WITH_OPENCV
      if (drawn) {
        cv::Mat image = decoded.pixels.clone();
        DrawDetections(boxes, names, &image);
        WriteDrawn(drawn->Path(fs::path(tried[i].path).filename().string()), image);
      }
#endif
    }
    progress.Update(next);
  }
  progress.Finish();
  if (failed > 0)
    CREMA_THROW_RUNTIME(failed, " of ", paths.size(),
                        " image(s) could not be read (listed above); nothing was written");
  if (output_path.empty()) {
    std::fwrite(results.data(), 1, results.size(), stdout);
    std::fflush(stdout);
  } else {
    WriteFileAtomically(output_path, results);
  }
  if (drawn) drawn->Commit();
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    detect, "detect", "object boxes in images with an SSD deploy net and its weights",
    "crema detect --model DEPLOY.prototxt --weights W.caffemodel [--labelmap labelmap.prototxt] "
    "[--threshold 0.5] [--format csv|jsonl] [--out FILE] [--draw FOLDER] [--mean_file F | "
    "--mean_values B,G,R] [--scale S] [--raw_scale R] [--channel_swap 2,1,0] "
    "[--interpolation linear|area|cubic|nearest] [--batch N] [--gpu ID] IMAGES... | --list FILE "
    "| --dir FOLDER\n\n"
    "Each image is decoded with OpenCV as BGR (gray for a 1-channel net), resized to the net's "
    "input size whatever its aspect (SSD's WARP resize; --interpolation, default bilinear) and "
    "normalised as classify does: value = (pixel * raw_scale / 255 - mean[channel]) * scale, "
    "in the net's channel order (after --channel_swap). SSD's VGG nets want --mean_values "
    "104,117,123; MobileNet-SSD --mean_values 127.5 --scale 0.007843. Images go through the net "
    "--batch at a time (default: the net's input batch). The net's output must be a detection "
    "table (a DetectionOutput layer's top: rows image_id, label, score, xmin, ymin, xmax, ymax "
    "in [0, 1]); each row of an image with score >= --threshold becomes a box in pixels of the "
    "image as given (x * width, y * height, clipped to the image).\n\n"
    "Output (stdout, or --out FILE): CSV with a header "
    "image,class_id,class_name,score,x1,y1,x2,y2 and one row per box, or JSON lines "
    "{\"image\": P, \"class_id\": L, \"class\": NAME, \"score\": S, \"box\": [x1, y1, x2, y2]}; "
    "an image without boxes writes nothing. class_name is the label's display_name in "
    "--labelmap (empty without one). --draw FOLDER writes a copy of each image, with each box "
    "as a rectangle in its class's colour (Tableau 10 by label mod 10: 0 blue, 1 orange, 2 "
    "green, 3 red, ...) labelled \"name 0.87\", to FOLDER/<file name>. If an image cannot be "
    "read, each one that fails is named on stderr, nothing is written (neither results nor "
    "drawings) and the exit code is 1.",
    {"memory_plan", "model",     "weights",      "labelmap",      "threshold",
     "format",      "out",       "draw",         "mean_file",     "mean_values",
     "scale",       "raw_scale", "channel_swap", "interpolation", "batch",
     "gpu",         "list",      "dir",          "fold_bn",       "amp"},
    &crema::cli::RunDetect);
