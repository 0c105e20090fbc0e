#include "image_datum.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "io/data_transformer.hpp"
#include "io/input_checks.hpp"

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

// Caffe's matchExt: the file's extension is the encoding (jpeg counts as jpg).
bool MatchesEncoding(const std::string& path, const std::string& encoding) {
  const std::string ext = Extension(path), enc = Lower(encoding);
  return ext == enc || (enc == "jpg" && ext == "jpeg");
}

}  // namespace

std::string Extension(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return Lower(path.substr(dot + 1));
}

#ifdef CREMA_WITH_OPENCV
bool ReadImageToDatum(const std::string& path, int label, const ImageToDatum& options, Datum* datum,
                      std::string* why, int* original_height, int* original_width) {
  if (!std::ifstream(path)) {  // checked first: OpenCV would log its own warning
    *why = "no such file (or not readable)";
    return false;
  }
  cv::Mat image;
  try {
    image = cv::imread(path, options.is_color ? cv::IMREAD_COLOR : cv::IMREAD_GRAYSCALE);
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
  if (original_height != nullptr) *original_height = image.rows;
  if (original_width != nullptr) *original_width = image.cols;
  const bool scaled = options.min_dim > 0 || options.max_dim > 0;
  const bool resized = scaled || (options.height > 0 && options.width > 0);
  if (scaled) {
    // SSD's ReadImageToCVMat: up to make the short side min_dim, then down so that the long side
    // is at most max_dim.
    const int min_side = std::min(image.rows, image.cols);
    const int max_side = std::max(image.rows, image.cols);
    float scale = 1;
    if (options.min_dim > 0 && min_side < options.min_dim)
      scale = static_cast<float>(options.min_dim) / static_cast<float>(min_side);
    if (options.max_dim > 0 &&
        static_cast<int>(scale * static_cast<float>(max_side)) > options.max_dim)
      scale = static_cast<float>(options.max_dim) / static_cast<float>(max_side);
    if (scale != 1) {
      cv::Mat out;
      cv::resize(image, out, cv::Size(0, 0), scale, scale);
      image = out;
    }
  } else if (resized) {
    cv::Mat out;
    cv::resize(image, out, cv::Size(options.width, options.height));
    image = out;
  }
  if (!options.encoding.empty()) {
    std::string bytes;
    if ((image.channels() == 3) == options.is_color && options.height == 0 && options.width == 0 &&
        !scaled && MatchesEncoding(path, options.encoding)) {
      // The file is already what would be stored: keep its bytes (Caffe's ReadFileToDatum).
      std::ifstream file(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    } else {
      std::vector<uchar> buffer;
      try {
        if (!cv::imencode("." + options.encoding, image, buffer)) {
          *why = "cannot encode it as " + options.encoding;
          return false;
        }
      } catch (const cv::Exception& e) {
        *why = "cannot encode it as " + options.encoding + ": " + OneLineMessage(e.what());
        return false;
      }
      bytes.assign(buffer.begin(), buffer.end());
    }
    datum->Clear();
    if (options.encoded_size) {
      datum->set_channels(image.channels());
      datum->set_height(image.rows);
      datum->set_width(image.cols);
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
#else
bool ReadImageToDatum(const std::string&, int, const ImageToDatum&, Datum*, std::string* why, int*,
                      int*) {
  *why = "this crema was built without OpenCV";
  return false;
}
#endif

DatumWriter::DatumWriter(db::DB* db, ConvertProgress* progress)
    : txn_(db->NewTransaction()), progress_(progress) {}

void DatumWriter::CheckSize(const Datum& datum, const std::string& path) {
  if (!FLAGS_check_size || datum.encoded()) return;
  const int64_t size = static_cast<int64_t>(datum.data().size());
  if (data_size_ < 0) {
    data_size_ = size;
  } else if (size != data_size_) {
    CREMA_THROW_RUNTIME("--check_size: '", path, "' is ", datum.channels(), " x ", datum.height(),
                        " x ", datum.width(), " (", size, " bytes), but the first image had ",
                        data_size_, " bytes");
  }
}

void DatumWriter::Put(size_t line_id, const std::string& name, const std::string& value) {
  char key[16];
  std::snprintf(key, sizeof(key), "%08d", static_cast<int>(line_id));
  txn_->Put(std::string(key) + "_" + name, value);
  if (++count_ % 1000 == 0) {
    txn_->Commit();
    if (!progress_->live()) {
      std::printf("processed %lld files\n", static_cast<long long>(count_));
      std::fflush(stdout);
    }
  }
}

void DatumWriter::Finish() {
  if (count_ % 1000 != 0) txn_->Commit();
}

}  // namespace crema::cli
