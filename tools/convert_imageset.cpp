// crema convert-imageset ROOTFOLDER LISTFILE DB_NAME: Caffe's convert_imageset. Each line of
// LISTFILE is "path label" (the label after the last space); ROOTFOLDER + path is decoded with
// OpenCV (BGR, or gray with --gray), resized with --resize_width/--resize_height (both > 0), and
// stored as a Datum under the key "%08d_%s" (line index, path), exactly as Caffe writes it: raw
// C x H x W uint8 pixels, or with --encoded the image file itself (when it needs no conversion)
// or its re-encoding in --encode_type (else the file's extension). Images that can't be read
// are reported with their path and skipped; their line index is not reused.
#include <gflags/gflags.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "flags.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "progress.hpp"
#include "verb.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

DEFINE_bool(gray, false, "Decode the images as grayscale (1 channel) instead of BGR.");
DEFINE_bool(shuffle, false, "Shuffle the order of the images (and their keys).");
DEFINE_int32(resize_width, 0, "Width the images are resized to (with --resize_height; 0: keep).");
DEFINE_int32(resize_height, 0, "Height the images are resized to (with --resize_width; 0: keep).");
DEFINE_bool(check_size, false, "Check that all the images have the same size.");
DEFINE_bool(encoded, false, "Store the images encoded (JPEG/PNG bytes) instead of raw pixels.");
DEFINE_string(encode_type, "",
              "The encoding of the stored images ('png', 'jpg', ...); implies --encoded. Empty: "
              "each file's own extension.");

namespace crema::cli {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The extension after the last '.', lower-cased ("" when none).
std::string Extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return Lower(path.substr(dot + 1));
}

// Caffe's matchExt: the file's extension is the encoding (jpeg counts as jpg).
bool MatchesEncoding(const std::string& path, const std::string& encoding) {
  const std::string ext = Extension(path), enc = Lower(encoding);
  return ext == enc || (enc == "jpg" && ext == "jpeg");
}

std::vector<std::pair<std::string, int>> ReadList(const std::string& list) {
  std::ifstream in(list);
  if (!in) CREMA_THROW_RUNTIME("cannot open the list file '", list, "'");
  std::vector<std::pair<std::string, int>> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string path;
    int label = 0;
    if (!SplitPathLabel(line, &path, &label))
      CREMA_THROW_CONFIG(list, ":", number,
                         ": expected \"path label\" (an integer label after the "
                         "last space), got '",
                         line, "'");
    lines.emplace_back(path, label);
  }
  if (lines.empty()) CREMA_THROW_RUNTIME("the list file '", list, "' lists no images");
  return lines;
}

#ifdef CREMA_WITH_OPENCV
// Caffe's ReadImageToDatum; false (with the reason in *why) when the image can't be used.
bool ReadImageToDatum(const std::string& path, int label, int height, int width, bool is_color,
                      const std::string& encoding, Datum* datum, std::string* why) {
  if (!std::ifstream(path)) {  // checked first: OpenCV would log its own warning
    *why = "no such file (or not readable)";
    return false;
  }
  cv::Mat image;
  try {
    image = cv::imread(path, is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
  } catch (const cv::Exception& e) {
    *why = OneLineMessage(e.what());
    return false;
  }
  if (image.empty()) {
    *why = "not an image OpenCV can decode (corrupt?)";
    return false;
  }
  if (image.depth() != CV_8U) {
    *why = "not an 8-bit image";
    return false;
  }
  if (height > 0 && width > 0) {
    cv::Mat resized;
    cv::resize(image, resized, cv::Size(width, height));
    image = resized;
  }
  if (!encoding.empty()) {
    std::string bytes;
    if ((image.channels() == 3) == is_color && height == 0 && width == 0 &&
        MatchesEncoding(path, encoding)) {
      // The file is already what would be stored: keep its bytes (Caffe's ReadFileToDatum).
      std::ifstream file(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    } else {
      std::vector<uchar> buffer;
      try {
        if (!cv::imencode("." + encoding, image, buffer)) {
          *why = "cannot encode it as " + encoding;
          return false;
        }
      } catch (const cv::Exception& e) {
        *why = "cannot encode it as " + encoding + ": " + OneLineMessage(e.what());
        return false;
      }
      bytes.assign(buffer.begin(), buffer.end());
    }
    datum->set_data(std::move(bytes));
    datum->set_label(label);
    datum->set_encoded(true);
    return true;
  }
  InterleavedToDatum(image.ptr<uint8_t>(0), image.step, image.channels(), image.rows, image.cols,
                     datum);
  datum->set_label(label);
  return true;
}
#endif

int RunConvertImageset(const std::vector<std::string>& args) {
  if (args.size() != 3)
    CREMA_THROW_CONFIG("convert-imageset takes 3 arguments (ROOTFOLDER LISTFILE DB_NAME), got ",
                       args.size(), " (crema convert-imageset --help)");
  if (FLAGS_resize_width < 0 || FLAGS_resize_height < 0)
    CREMA_THROW_CONFIG("--resize_width and --resize_height must be >= 0");
#ifndef CREMA_WITH_OPENCV
  CREMA_THROW_RUNTIME("convert-imageset needs OpenCV, and this crema was built without it");
#else
  const std::string& root_folder = args[0];
  const db::Backend backend = db::ParseBackend(FLAGS_backend);
  const bool is_color = !FLAGS_gray;
  const bool encoded = FLAGS_encoded || !FLAGS_encode_type.empty();
  if (!FLAGS_encoded && !FLAGS_encode_type.empty())
    std::printf("--encode_type given: storing encoded images (--encoded)\n");
  // As Caffe: resized only when both sizes are given; an encoded file is stored as is only when
  // neither is.
  const int height = FLAGS_resize_height, width = FLAGS_resize_width;

  std::vector<std::pair<std::string, int>> lines = ReadList(args[1]);
  if (FLAGS_shuffle) {
    RngEngine& rng = ThreadRng();
    for (size_t i = lines.size() - 1; i > 0; --i)
      std::swap(lines[i], lines[std::uniform_int_distribution<size_t>(0, i)(rng)]);
  }
  std::printf("a total of %zu images\n", lines.size());
  std::fflush(stdout);

  auto db = db::OpenDB(backend, args[2], db::Mode::kNew);
  auto txn = db->NewTransaction();
  Datum datum;
  int64_t count = 0, skipped = 0, data_size = -1;
  // On a terminal a live count replaces the "processed N files" lines.
  ConvertProgress progress(static_cast<int64_t>(lines.size()), "images");
  for (size_t line_id = 0; line_id < lines.size(); ++line_id) {
    progress.Update(static_cast<int64_t>(line_id));
    const std::string& name = lines[line_id].first;
    const std::string path = root_folder + name;
    std::string encoding = FLAGS_encode_type;
    if (encoded && encoding.empty()) {
      encoding = Extension(name);
      if (encoding.empty()) {
        progress.Message(StrCat("warning: skipping '", path,
                                "': cannot guess its encoding from the name (give --encode_type)"),
                         stderr);
        ++skipped;
        continue;
      }
    }
    std::string why;
    if (!ReadImageToDatum(path, lines[line_id].second, height, width, is_color, encoding, &datum,
                          &why)) {
      progress.Message(StrCat("warning: skipping '", path, "' (line ", line_id + 1,
                              " of the list as read): ", why),
                       stderr);
      ++skipped;
      continue;
    }
    if (FLAGS_check_size && !datum.encoded()) {
      const int64_t size = static_cast<int64_t>(datum.data().size());
      if (data_size < 0) {
        data_size = size;
      } else if (size != data_size) {
        CREMA_THROW_RUNTIME("--check_size: '", path, "' is ", datum.channels(), " x ",
                            datum.height(), " x ", datum.width(), " (", size,
                            " bytes), but the first image had ", data_size, " bytes");
      }
    }
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", static_cast<int>(line_id));
    txn->Put(std::string(key) + "_" + name, datum.SerializeAsString());
    if (++count % 1000 == 0) {
      txn->Commit();
      if (!progress.live()) {
        std::printf("processed %lld files\n", static_cast<long long>(count));
        std::fflush(stdout);
      }
    }
  }
  if (count % 1000 != 0) txn->Commit();
  progress.Update(static_cast<int64_t>(lines.size()));
  progress.Finish();
  std::printf("wrote %lld records to %s (%s)", static_cast<long long>(count), args[2].c_str(),
              db::BackendName(backend));
  if (skipped > 0)
    std::printf("; skipped %lld images that could not be read", static_cast<long long>(skipped));
  std::printf("\n");
  return 0;
#endif
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    convert_imageset, "convert-imageset",
    "convert a list of images to a Datum DB (Caffe's convert_imageset)",
    "crema convert-imageset ROOTFOLDER LISTFILE DB_NAME [--gray] [--shuffle] [--backend lmdb]\n"
    "    [--resize_width W --resize_height H] [--check_size] [--encoded] [--encode_type png]\n"
    "  LISTFILE: one \"path label\" per line (e.g. cat/1.jpg 3); ROOTFOLDER is prepended to each\n"
    "  path (end it with '/'). DB_NAME: the folder to create (must not exist). Records are\n"
    "  Caffe's: key \"%08d_path\" (line index), a Datum of raw C x H x W uint8 BGR pixels, or the\n"
    "  encoded image with --encoded. Unreadable images are reported and skipped. On a terminal\n"
    "  (--progress auto) a live line shows the count, images/s and ETA.",
    {"backend", "gray", "shuffle", "resize_width", "resize_height", "check_size", "encoded",
     "encode_type", "progress"},
    &crema::cli::RunConvertImageset);
