#include "io/mnist.hpp"

#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// An idx file read sequentially, plain or (detected by its first bytes) gzipped.
class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) CREMA_THROW_RUNTIME("cannot open '", path, "': ", std::strerror(errno));
    unsigned char head[2] = {0, 0};
    const size_t got = std::fread(head, 1, 2, file_);
    if (got == 2 && head[0] == 0x1f && head[1] == 0x8b) {
      std::fclose(file_);
      const std::string command = "gzip -dc -- " + ShellQuote(path);
      file_ = popen(command.c_str(), "r");
      if (file_ == nullptr)
        CREMA_THROW_RUNTIME("cannot run `", command, "`: ", std::strerror(errno), " (gunzip '",
                            path, "' and pass the result)");
      piped_ = true;
    } else {
      std::rewind(file_);
      struct stat st;
      if (stat(path.c_str(), &st) == 0) size_ = st.st_size;
    }
  }
  ~IdxFile() { Close(/*check=*/false); }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }
  bool piped() const { return piped_; }
  int64_t size() const { return size_; }  // -1 when read through gzip

  // Reads `n` bytes; false at a premature end of the file.
  bool Read(void* buffer, size_t n) { return std::fread(buffer, 1, n, file_) == n; }

  uint32_t ReadHeaderWord(const char* what) {
    unsigned char bytes[4];
    if (!Read(bytes, 4))
      CREMA_THROW_CONFIG("'", path_, "' is too short to be an idx file (no ", what, ")");
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
           uint32_t{bytes[3]};
  }

  // For gzip: drains the pipe and (when `check`) checks gzip's exit status.
  void Close(bool check = true) {
    if (file_ == nullptr) return;
    FILE* file = file_;
    file_ = nullptr;
    if (!piped_) {
      std::fclose(file);
      return;
    }
    char sink[1 << 16];
    while (std::fread(sink, 1, sizeof(sink), file) > 0) {
    }
    const int status = pclose(file);
    if (status != 0 && check)
      CREMA_THROW_RUNTIME("`gzip -dc ", path_, "` failed (status ", status,
                          "); is the file a complete .gz?");
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  bool piped_ = false;
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
