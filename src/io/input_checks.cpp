#include "io/input_checks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "crema/blob.hpp"
#include "crema/error.hpp"

namespace crema {
namespace {

std::atomic<bool>& ForbidFlag() {
  static std::atomic<bool> forbid([] {
    const char* env = std::getenv("CREMA_FORBID_PATH_ESCAPE");
    return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
  }());
  return forbid;
}

// Whether the relative `path` climbs above its starting folder through "..".
bool ClimbsOut(const std::string& path) {
  int depth = 0;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(begin, end - begin);
    if (part == "..") {
      if (--depth < 0) return true;
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
    begin = end + 1;
  }
  return false;
}

}  // namespace

std::string OneLineMessage(const std::string& message) {
  std::string line;
  for (char c : message) {
    const bool space = c == '\n' || c == '\r';
    if (space && (line.empty() || line.back() == ' ')) continue;
    line += space ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

namespace {

uint32_t BigEndian(const std::string& b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

uint32_t LittleEndian32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// JPEG: the frame header (SOF0..SOF15 but DHT, JPG and DAC) after the segments before it.
bool JpegSize(const std::string& b, int64_t* width, int64_t* height) {
  size_t at = 2;
  while (at + 4 <= b.size()) {
    // Bytes before a marker are skipped, as libjpeg does (with a warning), so a header it
    // decodes is not missed here.
    if (static_cast<unsigned char>(b[at]) != 0xff) {
      ++at;
      continue;
    }
    const unsigned marker = static_cast<unsigned char>(b[at + 1]);
    if (marker == 0xff) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x00) {  // a stuffed 0xff in stray bytes: not a marker (libjpeg skips it)
      at += 2;
      continue;
    }
    if (marker == 0xd8 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;  // segments without a length
      continue;
    }
    // A length below 2 skips nothing past the length field (libjpeg's skip_variable).
    const uint32_t length = std::max<uint32_t>(BigEndian(b, at + 2, 2), 2);
    const bool frame =
        marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
    if (frame) {
      if (at + 9 > b.size()) return false;
      *height = BigEndian(b, at + 5, 2);
      *width = BigEndian(b, at + 7, 2);
      return true;
    }
    at += 2 + length;
  }
  return false;
}

}  // namespace

bool EncodedImageSize(const std::string& b, int64_t* width, int64_t* height) {
  if (b.size() >= 24 && b.compare(0, 8, "\x89PNG\r\n\x1a\n", 8) == 0 &&
      b.compare(12, 4, "IHDR") == 0) {
    *width = BigEndian(b, 16, 4);
    *height = BigEndian(b, 20, 4);
    return true;
  }
  if (b.size() >= 4 && static_cast<unsigned char>(b[0]) == 0xff &&
      static_cast<unsigned char>(b[1]) == 0xd8)
    return JpegSize(b, width, height);
  if (b.size() >= 26 && b[0] == 'B' && b[1] == 'M') {
    *width = static_cast<int32_t>(LittleEndian32(b, 18));
    *height = static_cast<int32_t>(LittleEndian32(b, 22));
    if (*width < 0) *width = -*width;
    if (*height < 0) *height = -*height;  // top-down rows
    return true;
  }
  return false;
}

int64_t CheckedElementCount(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return -1;
  return count;
}

void CheckEncodedImageSize(const std::string& bytes, int channels, const std::string& what) {
  // OpenCV hands a DICOM file ("DICM" after the 128-byte preamble) to GDCM, which allocates what
  // the file's element lengths declare before reading them; crema cannot check those first.
  if (bytes.size() >= 132 && bytes.compare(128, 4, "DICM") == 0)
    CREMA_THROW_RUNTIME(what,
                        ": DICOM images are not decoded (their reader allocates the sizes "
                        "the file declares before checking them); convert it to PNG");
  int64_t width = 0, height = 0;
  if (!EncodedImageSize(bytes, &width, &height)) return;
  if (width > INT32_MAX || height > INT32_MAX) {
    CREMA_THROW_RUNTIME(what, ": the image header declares ", width, " x ", height,
                        " pixels, more than a blob may hold");
  }
  try {
    Blob probe(std::vector<int>{1, channels, static_cast<int>(height), static_cast<int>(width)});
  } catch (const ConfigError& e) {
    CREMA_THROW_RUNTIME(what, ": the image header declares ", width, " x ", height,
                        " pixels, not decoded: ", e.what());
  }
}

void CheckImageFileSize(const std::string& path, int channels, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::string head(1 << 16, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  CheckEncodedImageSize(head, channels, what);
}

bool ForbidPathEscape() { return ForbidFlag().load(); }

void SetForbidPathEscape(bool forbid) { ForbidFlag().store(forbid); }

bool SplitPathLabel(const std::string& line, std::string* path, int* label) {
  const size_t pos = line.find_last_of(' ');
  if (pos == std::string::npos || pos == 0) return false;
  const std::string text = line.substr(pos + 1);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || value < INT32_MIN || value > INT32_MAX) return false;
  *path = line.substr(0, pos);
  *label = static_cast<int>(value);
  return true;
}

std::string ListedPath(const std::string& root_folder, const std::string& path,
                       const std::string& where) {
  if (ForbidPathEscape()) {
    const std::string root = root_folder.empty() ? "the current folder" : "'" + root_folder + "'";
    // Caffe joins by concatenation. With root_folder "" or ending in '/', the path is relative
    // to that folder (a leading '/' makes it absolute); with "data/img", a leading '/'
    // continues the folder ("data/img/x.png"), and otherwise root_folder's last name is a
    // prefix of the path's first ("data/imgx.png"), which then lives in root_folder's parent.
    const bool folder = root_folder.empty() || root_folder.back() == '/';
    if (folder && !path.empty() && path[0] == '/')
      CREMA_THROW_CONFIG(where, ": the absolute path '", path, "' is outside root_folder ", root,
                         " (paths may not leave it: --forbid_path_escape / "
                         "CREMA_FORBID_PATH_ESCAPE)");
    std::string joined;
    if (folder) {
      joined = path;
    } else if (!path.empty() && path[0] == '/') {
      joined = path.substr(1);
    } else {
      const size_t slash = root_folder.rfind('/');
      joined = (slash == std::string::npos ? root_folder : root_folder.substr(slash + 1)) + path;
    }
    if (ClimbsOut(joined))
      CREMA_THROW_CONFIG(where, ": the path '", path, "' leaves root_folder ", root,
                         " through '..' (paths may not leave it: --forbid_path_escape / "
                         "CREMA_FORBID_PATH_ESCAPE)");
  }
  return root_folder + path;
}

std::string ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) CREMA_THROW_RUNTIME("cannot read ", path, ": ", std::strerror(errno));
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      CREMA_THROW_RUNTIME("cannot read ", path, ": ", std::strerror(error));
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

}  // namespace crema
