#include "io/mnist.hpp"

#include <glog/logging.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"

namespace crema {
namespace {

constexpr uint32_t kImagesMagic = 2051;
constexpr uint32_t kLabelsMagic = 2049;
constexpr int kItemsPerCommit = 1000;

// An idx file read sequentially through zlib, which reads a gzipped file (detected by its
// first bytes; concatenated members too) and a plain one alike.
class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr)
      CREMA_THROW_RUNTIME("cannot open '", path,
                          "': ", errno != 0 ? std::strerror(errno) : "out of memory");
    gzbuffer(file_, 1 << 16);
    if (gzdirect(file_)) {
      struct stat st;
      if (stat(path.c_str(), &st) == 0) size_ = st.st_size;
    }
  }
  ~IdxFile() {
    if (file_ != nullptr) gzclose_r(file_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  int64_t size() const { return size_; }  // -1 when gzipped

  // Reads `n` bytes; false at a premature end of the file. A corrupt gzip stream is a
  // ConfigError naming the file.
  bool Read(void* buffer, size_t n) {
    auto* bytes = static_cast<char*>(buffer);
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
      const int got = gzread(file_, bytes, chunk);
      if (got < 0) Fail();
      if (got == 0) return false;
      bytes += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }

  uint32_t ReadHeaderWord(const char* what) {
    unsigned char bytes[4];
    if (!Read(bytes, 4))
      CREMA_THROW_CONFIG("'", path_, "' is too short to be an idx file (no ", what, ")");
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
           uint32_t{bytes[3]};
  }

  // Reads what follows the items (zlib checks a gzip member's CRC and length at its end) and
  // closes the file; ConfigError when the compressed data is corrupt or cut short.
  void Close() {
    char sink[1 << 16];
    while (Read(sink, sizeof(sink))) {
    }
    const int status = gzclose_r(file_);
    file_ = nullptr;
    if (status == Z_BUF_ERROR)
      CREMA_THROW_CONFIG("'", path_, "' ends in the middle of its gzip data (truncated .gz)");
    if (status != Z_OK) CREMA_THROW_RUNTIME("cannot read '", path_, "' (zlib status ", status, ")");
  }

 private:
  [[noreturn]] void Fail() const {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (code == Z_ERRNO) CREMA_THROW_RUNTIME("cannot read '", path_, "': ", std::strerror(errno));
    CREMA_THROW_CONFIG("'", path_, "' is not valid gzip data: ", message,
                       " (corrupt or truncated .gz?)");
  }

  std::string path_;
  gzFile file_ = nullptr;
  int64_t size_ = -1;
};

std::string Key(int64_t index) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%08lld", static_cast<long long>(index));
  return buffer;
}

}  // namespace

int64_t ConvertMnist(const std::string& images_path, const std::string& labels_path,
                     const std::string& db_path, db::Backend backend,
                     const std::function<void(int64_t, int64_t)>& progress) {
  std::unique_ptr<db::DB> db = db::GetDB(backend);  // an unavailable backend fails first
  IdxFile images(images_path);
  IdxFile labels(labels_path);
  const uint32_t images_magic = images.ReadHeaderWord("magic number");
  if (images_magic != kImagesMagic)
    CREMA_THROW_CONFIG(
        "'", images_path, "' is not an MNIST image file: magic number ", images_magic,
        ", expected ", kImagesMagic,
        images_magic == kLabelsMagic ? " (it is a label file; swap the arguments)" : "");
  const uint32_t labels_magic = labels.ReadHeaderWord("magic number");
  if (labels_magic != kLabelsMagic)
    CREMA_THROW_CONFIG(
        "'", labels_path, "' is not an MNIST label file: magic number ", labels_magic,
        ", expected ", kLabelsMagic,
        labels_magic == kImagesMagic ? " (it is an image file; swap the arguments)" : "");
  const uint32_t num_items = images.ReadHeaderWord("item count");
  const uint32_t num_labels = labels.ReadHeaderWord("item count");
  if (num_items != num_labels)
    CREMA_THROW_CONFIG("'", images_path, "' holds ", num_items, " images but '", labels_path,
                       "' holds ", num_labels, " labels");
  const uint32_t rows = images.ReadHeaderWord("row count");
  const uint32_t cols = images.ReadHeaderWord("column count");
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536)
    CREMA_THROW_CONFIG("'", images_path, "' has images of ", rows, " x ", cols, " pixels");
  const size_t image_size = static_cast<size_t>(rows) * cols;
  // Plain files are checked for truncation before anything is written.
  if (images.size() >= 0 && images.size() < 16 + static_cast<int64_t>(image_size) * num_items)
    CREMA_THROW_CONFIG("'", images_path, "' is truncated: ", images.size(), " bytes for ",
                       num_items, " images of ", rows, " x ", cols);
  if (labels.size() >= 0 && labels.size() < 8 + static_cast<int64_t>(num_items))
    CREMA_THROW_CONFIG("'", labels_path, "' is truncated: ", labels.size(), " bytes for ",
                       num_items, " labels");

  db->Open(db_path, db::Mode::kNew);
  LOG(INFO) << "A total of " << num_items << " items, " << rows << " x " << cols
            << " pixels; writing " << db::BackendName(backend) << " " << db_path;
  std::unique_ptr<db::Transaction> txn = db->NewTransaction();
  Datum datum;
  datum.set_channels(1);
  datum.set_height(static_cast<int>(rows));
  datum.set_width(static_cast<int>(cols));
  std::string pixels(image_size, '\0');
  std::string value;
  int64_t count = 0;
  try {
    for (uint32_t item = 0; item < num_items; ++item) {
      unsigned char label = 0;
      if (!images.Read(pixels.data(), image_size))
        CREMA_THROW_CONFIG("'", images_path, "' ends after ", item, " of ", num_items,
                           " images (truncated)");
      if (!labels.Read(&label, 1))
        CREMA_THROW_CONFIG("'", labels_path, "' ends after ", item, " of ", num_items,
                           " labels (truncated)");
      datum.set_data(pixels);
      datum.set_label(label);
      datum.SerializeToString(&value);
      txn->Put(Key(item), value);
      if (++count % kItemsPerCommit == 0) txn->Commit();
      if (progress) progress(count, num_items);
    }
    if (count % kItemsPerCommit != 0) txn->Commit();
    images.Close();
    labels.Close();
  } catch (...) {
    // Don't leave a half-written DB that a later run would refuse to overwrite.
    txn.reset();
    db.reset();
    std::error_code ec;
    std::filesystem::remove_all(db_path, ec);
    throw;
  }
  LOG(INFO) << "Processed " << count << " files.";
  return count;
}

}  // namespace crema
