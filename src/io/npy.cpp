#include "io/npy.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "crema/error.hpp"
#include "io/input_checks.hpp"

namespace crema {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy I/O assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// A cursor over the header's Python dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  void Parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    Expect('{');
    while (true) {
      SkipSpace();
      if (Peek() == '}') break;
      const std::string key = ReadString();
      Expect(':');
      if (key == "descr") {
        SkipSpace();
        if (Peek() != '\'' && Peek() != '"')
          Fail(
              "structured dtypes are not supported (descr must be a plain type string such as "
              "'<f4')");
        *descr = ReadString();
        seen_descr = true;
      } else if (key == "fortran_order") {
        *fortran_order = ReadBool();
        seen_order = true;
      } else if (key == "shape") {
        *shape = ReadTuple();
        seen_shape = true;
      } else {
        Fail("unexpected header key '" + key + "'");
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      SkipSpace();
      if (Peek() != '}') Fail("expected ',' or '}' in the header");
    }
    if (!seen_descr || !seen_order || !seen_shape)
      Fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    CREMA_THROW_CONFIG(name_, ": not a valid .npy file: ", what, " (header: ", text_, ")");
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string ReadString() {
    SkipSpace();
    const char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos) Fail("unterminated string");
    std::string s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }
  bool ReadBool() {
    SkipSpace();
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    Fail("fortran_order must be True or False");
  }
  std::vector<int64_t> ReadTuple() {
    Expect('(');
    std::vector<int64_t> dims;
    while (true) {
      SkipSpace();
      if (Peek() == ')') {
        ++pos_;
        return dims;
      }
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) Fail("bad shape");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        v = v * 10 + (text_[pos_] - '0');
        if (v > (int64_t{1} << 40)) Fail("shape dimension too large");
        ++pos_;
      }
      if (Peek() == 'L') ++pos_;  // Python 2 long suffix
      dims.push_back(v);
      SkipSpace();
      if (Peek() == ',') ++pos_;
    }
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
};

template <typename T>
void Convert(const char* src, int64_t count, std::vector<double>* out) {
  out->resize(count);
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    (*out)[i] = static_cast<double>(v);
  }
}

}  // namespace

NpyArray ParseNpy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < kMagicSize + 4 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0)
    CREMA_THROW_CONFIG(name, ": not a .npy file (the magic string \\x93NUMPY is missing)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) CREMA_THROW_CONFIG(name, ": truncated .npy file (header)");
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    CREMA_THROW_CONFIG(name, ": unsupported .npy format version ", major, " (1, 2 and 3 are)");
  }
  if (bytes.size() < header_start + header_len)
    CREMA_THROW_CONFIG(name, ": truncated .npy file (the header says ", header_len,
                       " bytes, the file ends before)");
  const std::string header = bytes.substr(header_start, header_len);

  NpyArray array;
  bool fortran_order = false;
  HeaderParser(header, name).Parse(&array.descr, &fortran_order, &array.shape);

  int64_t count = 1;
  for (int64_t d : array.shape) count *= d;
  if (fortran_order && array.shape.size() > 1 && count > 1)
    CREMA_THROW_CONFIG(name,
                       ": Fortran-order arrays are not supported; save a C-order array "
                       "(numpy.ascontiguousarray(a))");

  const std::string& d = array.descr;
  if (d.size() < 3 || (d[0] != '<' && d[0] != '|' && d[0] != '=' && d[0] != '>'))
    CREMA_THROW_CONFIG(name, ": unsupported dtype '", d, "' (float32 '<f4' or float64 '<f8')");
  const std::string kind = d.substr(1);
  const bool one_byte = kind == "u1" || kind == "i1" || kind == "b1";
  if (d[0] == '>' && !one_byte)
    CREMA_THROW_CONFIG(name, ": big-endian dtype '", d,
                       "' is not supported; save with "
                       "a.astype('<f4')");
  size_t item = 0;
  if (kind == "f4" || kind == "i4" || kind == "u4")
    item = 4;
  else if (kind == "f8" || kind == "i8" || kind == "u8")
    item = 8;
  else if (kind == "i2" || kind == "u2")
    item = 2;
  else if (one_byte)
    item = 1;
  else
    CREMA_THROW_CONFIG(name, ": unsupported dtype '", d,
                       "' (float32 '<f4' and float64 '<f8' are supported, integer arrays are "
                       "converted)");

  const size_t data_start = header_start + header_len;
  const size_t need = static_cast<size_t>(count) * item;
  if (bytes.size() - data_start < need)
    CREMA_THROW_CONFIG(name, ": truncated .npy file: shape and dtype '", d, "' need ", need,
                       " data bytes, the file has ", bytes.size() - data_start);
  const char* src = bytes.data() + data_start;
  if (kind == "f4")
    Convert<float>(src, count, &array.values);
  else if (kind == "f8")
    Convert<double>(src, count, &array.values);
  else if (kind == "i4")
    Convert<int32_t>(src, count, &array.values);
  else if (kind == "u4")
    Convert<uint32_t>(src, count, &array.values);
  else if (kind == "i8")
    Convert<int64_t>(src, count, &array.values);
  else if (kind == "u8")
    Convert<uint64_t>(src, count, &array.values);
  else if (kind == "i2")
    Convert<int16_t>(src, count, &array.values);
  else if (kind == "u2")
    Convert<uint16_t>(src, count, &array.values);
  else if (kind == "i1")
    Convert<int8_t>(src, count, &array.values);
  else
    Convert<uint8_t>(src, count, &array.values);  // u1, b1
  return array;
}

NpyArray ReadNpy(const std::string& path) { return ParseNpy(ReadWholeFile(path), path); }

void ReadNpyIntoBlob(const std::string& path, Blob* blob) {
  const NpyArray array = ReadNpy(path);
  std::vector<int> shape;
  for (int64_t d : array.shape) {
    if (d > 0x7fffffff) CREMA_THROW_CONFIG(path, ": dimension ", d, " is too large for a blob");
    shape.push_back(static_cast<int>(d));
  }
  if (static_cast<int>(shape.size()) > Blob::kMaxAxes)
    CREMA_THROW_CONFIG(path, ": ", shape.size(), " axes; a blob has at most ", Blob::kMaxAxes);
  blob->Reshape(shape);
  CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
    T* dst = blob->mutable_cpu_data<T>();
    for (size_t i = 0; i < array.values.size(); ++i) dst[i] = static_cast<T>(array.values[i]);
  });
}

std::string NpyBytesFloat32(const std::vector<int64_t>& shape, const float* data) {
  // Python's repr of the shape tuple: (), (5,), (2, 3).
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so that magic + version + length + header is a multiple of 64, ending '\n'.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(count) * sizeof(float));
  return out;
}

void WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape,
                     const float* data) {
  const std::string bytes = NpyBytesFloat32(shape, data);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) CREMA_THROW_RUNTIME(path, ": cannot create the file (", std::strerror(errno), ")");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) CREMA_THROW_RUNTIME(path, ": write failed (", std::strerror(errno), ")");
}

void WriteBlobNpy(const std::string& path, const Blob& blob, bool diff) {
  std::vector<int64_t> shape(blob.shape().begin(), blob.shape().end());
  std::vector<float> values(blob.count());
  if (blob.dtype() == DataType::kFloat32) {
    const float* src = diff ? blob.cpu_diff<float>() : blob.cpu_data<float>();
    std::memcpy(values.data(), src, values.size() * sizeof(float));
  } else {
    for (int64_t i = 0; i < blob.count(); ++i)
      values[i] = static_cast<float>(diff ? blob.diff_at(i) : blob.data_at(i));
  }
  WriteNpyFloat32(path, shape, values.data());
}

}  // namespace crema
