#pragma once
// Helpers of the image tool tests (convert-imageset, compute-image-mean; RunCrema is in
// support/run_command.hpp): write small PNGs without OpenCV (the tests are not linked to it), read
// a DB back.
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/db.hpp"
#include "support/run_command.hpp"

namespace crema::testing {

using CremaResult = CommandResult;

inline void PngPut32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

inline void PngChunk(std::string* png, const char* type, const std::string& data) {
  PngPut32(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  *png += body;
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : body) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  PngPut32(png, crc ^ 0xffffffffu);
}

// An 8-bit PNG (zlib "stored" blocks); `pixels` is height x width x channels, RGB order for 3
// channels, gray for 1.
inline void WritePng(const std::string& path, int height, int width, int channels,
                     const std::vector<uint8_t>& pixels) {
  std::string raw;
  for (int h = 0; h < height; ++h) {
    raw.push_back('\0');  // filter: none
    raw.append(reinterpret_cast<const char*>(pixels.data()) + h * width * channels,
               width * channels);
  }
  std::string z = "\x78\x01";
  for (size_t pos = 0;; pos += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + n >= raw.size();
    z.push_back(last ? 1 : 0);
    z += {static_cast<char>(n & 0xff), static_cast<char>(n >> 8), static_cast<char>(~n & 0xff),
          static_cast<char>((~n >> 8) & 0xff)};
    z += raw.substr(pos, n);
    if (last) break;
  }
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
  PngPut32(&z, (b << 16) | a);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  PngPut32(&ihdr, width);
  PngPut32(&ihdr, height);
  ihdr += std::string{8, static_cast<char>(channels == 3 ? 2 : 0), 0, 0, 0};
  PngChunk(&png, "IHDR", ihdr);
  PngChunk(&png, "IDAT", z);
  PngChunk(&png, "IEND", "");
  std::ofstream(path, std::ios::binary) << png;
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::vector<std::pair<std::string, std::string>> ReadDb(
    const std::string& path, db::Backend backend = db::Backend::kLmdb) {
  std::vector<std::pair<std::string, std::string>> records;
  auto db = db::OpenDB(backend, path, db::Mode::kRead);
  for (auto cursor = db->NewCursor(); cursor->valid(); cursor->Next())
    records.emplace_back(cursor->key(), cursor->value());
  return records;
}

// The lines of a command's output.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One CSV row's fields, quotes removed ("" inside quotes is one ").
inline std::vector<std::string> CsvRow(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace crema::testing
