#pragma once
// What convert-imageset (Caffe's) and convert-annoset (SSD's) share: images to Datums (Caffe's
// ReadImageToDatum; SSD's adds --min_dim/--max_dim and records the size of encoded images), the
// writing of their records, and the flags both verbs read (defined in image_datum.cpp).
#include <gflags/gflags.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "crema/proto.hpp"
#include "io/db.hpp"
#include "progress.hpp"

DECLARE_bool(gray);
DECLARE_bool(shuffle);
DECLARE_int32(resize_width);
DECLARE_int32(resize_height);
DECLARE_bool(check_size);
DECLARE_bool(encoded);
DECLARE_string(encode_type);

namespace crema::cli {

// The extension after the last '.', lower-cased ("" when none).
std::string Extension(const std::string& path);

struct ImageToDatum {
  int height = 0, width = 0;     // resized to width x height when both are > 0
  int min_dim = 0, max_dim = 0;  // else, when either is > 0, scaled keeping the aspect ratio (SSD)
  bool is_color = true;          // BGR, else gray
  std::string encoding;          // "" -> raw C x H x W pixels; else stored encoded ("png", "jpg")
  // SSD sets channels, height and width on encoded Datums too; Caffe leaves them unset.
  bool encoded_size = false;
};

// Decodes `path` with OpenCV into `datum` (with `label`); false, with the reason in *why, when
// the image can't be used. An encoded Datum holds the file's own bytes when nothing would change
// them (no resizing, the channels asked for, the extension matches the encoding), else the image
// re-encoded. `original_height`/`original_width` (when given) get the size of the decoded file
// before any resizing. Without OpenCV in this build it always fails.
bool ReadImageToDatum(const std::string& path, int label, const ImageToDatum& options, Datum* datum,
                      std::string* why, int* original_height = nullptr,
                      int* original_width = nullptr);

// With --shuffle, the list lines in a random order (crema's seeded RNG); then the verbs' "a total
// of N images" line.
template <typename Line>
void ShuffleAndCount(std::vector<Line>* lines) {
  if (FLAGS_shuffle) {
    RngEngine& rng = ThreadRng();
    for (size_t i = lines->size() - 1; i > 0; --i)
      std::swap((*lines)[i], (*lines)[std::uniform_int_distribution<size_t>(0, i)(rng)]);
  }
  std::printf("a total of %zu images\n", lines->size());
  std::fflush(stdout);
}

// Writes the records of a convert verb: keys "%08d_NAME" (line index, path), as Caffe's tools;
// a commit every 1000 records (with a "processed N files" line when `progress` is not live), and
// the last on Finish.
class DatumWriter {
 public:
  DatumWriter(db::DB* db, ConvertProgress* progress);
  // With --check_size: RuntimeError naming `path` when a raw Datum's size differs from the
  // first one's (encoded Datums are not checked).
  void CheckSize(const Datum& datum, const std::string& path);
  void Put(size_t line_id, const std::string& name, const std::string& value);
  void Finish();
  int64_t count() const { return count_; }

 private:
  std::unique_ptr<db::Transaction> txn_;
  ConvertProgress* progress_;
  int64_t count_ = 0, data_size_ = -1;
};

}  // namespace crema::cli
