#include <gtest/gtest.h>
#include <lmdb.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "io/mnist.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

std::vector<std::pair<std::string, std::string>> ReadLmdb(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> records;
  MDB_env* env = nullptr;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOLOCK, 0664), 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  MDB_cursor* cursor = nullptr;
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  EXPECT_EQ(mdb_cursor_open(txn, dbi, &cursor), 0);
  MDB_val key, value;
  while (mdb_cursor_get(cursor, &key, &value, MDB_NEXT) == 0)
    records.emplace_back(std::string(static_cast<char*>(key.mv_data), key.mv_size),
                         std::string(static_cast<char*>(value.mv_data), value.mv_size));
  mdb_cursor_close(cursor);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return records;
}

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// The first `n` bytes of a gzipped file.
std::string GunzipPrefix(const std::string& path, size_t n) {
  FILE* pipe = popen(("gzip -dc '" + path + "'").c_str(), "r");
  if (pipe == nullptr) return "";
  std::string bytes(n, '\0');
  bytes.resize(std::fread(bytes.data(), 1, n, pipe));
  pclose(pipe);
  return bytes;
}

// Small synthetic idx files: `n` images of 2 x 3 and their labels.
std::pair<std::string, std::string> MakeIdx(const std::string& dir, uint32_t n) {
  std::string images = BigEndian(2051) + BigEndian(n) + BigEndian(2) + BigEndian(3);
  std::string labels = BigEndian(2049) + BigEndian(n);
  for (uint32_t i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) images.push_back(static_cast<char>(i * 10 + p));
    labels.push_back(static_cast<char>(i % 10));
  }
  WriteFile(dir + "/images", images);
  WriteFile(dir + "/labels", labels);
  return {dir + "/images", dir + "/labels"};
}

TEST(ConvertMnistTest, First320FashionMnistImagesMatchCaffe) {
  CREMA_REQUIRE_REFERENCE(reference, "bvlc/fmnist_small/train320_lmdb");
  const std::string gz_images = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  const std::string gz_labels = "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";
  if (!std::ifstream(gz_images) || !std::ifstream(gz_labels))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  const uint32_t n = 320;
  std::string images = GunzipPrefix(gz_images, 16 + n * 784);
  std::string labels = GunzipPrefix(gz_labels, 8 + n);
  ASSERT_EQ(images.size(), 16 + n * 784);
  ASSERT_EQ(labels.size(), 8 + n);
  images.replace(4, 4, BigEndian(n));
  labels.replace(4, 4, BigEndian(n));
  const std::string dir = testing::TempDir();
  WriteFile(dir + "/images", images);
  WriteFile(dir + "/labels", labels);
  EXPECT_EQ(ConvertMnist(dir + "/images", dir + "/labels", dir + "/db"), n);

  const auto expected = ReadLmdb(reference);
  const auto actual = ReadLmdb(dir + "/db");
  ASSERT_EQ(expected.size(), n);
  ASSERT_EQ(actual.size(), n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(actual[i].first, expected[i].first) << i;
    ASSERT_EQ(actual[i].second, expected[i].second) << "record " << i;
  }
}

TEST(ConvertMnistTest, RecordLayoutAndGzipInput) {
  const std::string dir = testing::TempDir();
  const auto [images, labels] = MakeIdx(dir, 1203);
  EXPECT_EQ(ConvertMnist(images, labels, dir + "/plain"), 1203);
  const auto records = ReadLmdb(dir + "/plain");
  ASSERT_EQ(records.size(), 1203u);
  EXPECT_EQ(records[0].first, "00000000");
  EXPECT_EQ(records[1202].first, "00001202");
  // channels 1, height 2, width 3, 6 raw bytes, label: Caffe's wire layout.
  const std::string expected = std::string("\x08\x01\x10\x02\x18\x03\x22\x06", 8) +
                               std::string("\x0a\x0b\x0c\x0d\x0e\x0f", 6) +
                               std::string("\x28\x01", 2);
  EXPECT_EQ(records[1].second, expected);

  ASSERT_EQ(std::system(("gzip -k '" + images + "' '" + labels + "'").c_str()), 0);
  EXPECT_EQ(ConvertMnist(images + ".gz", labels + ".gz", dir + "/gz"), 1203);
  EXPECT_EQ(ReadLmdb(dir + "/gz"), records);
}

std::string ErrorOf(const std::function<void()>& f);

// .gz files are read with zlib: no `gzip` program is needed (they once went through
// popen("gzip -dc")), and damaged compressed data is an error naming the file.
TEST(ConvertMnistTest, GzipIsReadWithZlib) {
  const std::string dir = testing::TempDir();
  // Named references, not a structured binding: C++17 lambdas cannot capture those.
  const auto idx = MakeIdx(dir, 7);
  const std::string& images = idx.first;
  const std::string& labels = idx.second;
  // images.gz, and the same bytes as two gzip members one after the other (one stream to zlib).
  std::string raw;
  {
    std::ifstream in(images, std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), {});
  }
  WriteFile(dir + "/part1", raw.substr(0, 20));
  WriteFile(dir + "/part2", raw.substr(20));
  ASSERT_EQ(std::system(("gzip -k '" + images + "' '" + labels + "' '" + dir + "/part1' '" + dir +
                         "/part2' && cat '" + dir + "/part1.gz' '" + dir + "/part2.gz' > '" + dir +
                         "/two_members.gz'")
                            .c_str()),
            0);
  std::string gz;
  {
    std::ifstream in(images + ".gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(gz.size(), 30u);
  // Without any program on PATH.
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (dir + "/no_programs_here").c_str(), 1);
  const int64_t written = ConvertMnist(images + ".gz", labels + ".gz", dir + "/db");
  setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(written, 7);
  EXPECT_EQ(ConvertMnist(images, labels, dir + "/plain"), 7);
  EXPECT_EQ(ReadLmdb(dir + "/db"), ReadLmdb(dir + "/plain"));
  EXPECT_EQ(ConvertMnist(dir + "/two_members.gz", labels + ".gz", dir + "/db_two"), 7);
  EXPECT_EQ(ReadLmdb(dir + "/db_two"), ReadLmdb(dir + "/db"));
  // A flipped byte inside the compressed data (caught by the inflater or the CRC) and a file cut
  // inside its trailer: ConfigErrors naming the file, and no DB left behind.
  std::string corrupt = gz;
  corrupt[corrupt.size() - 6] = static_cast<char>(corrupt[corrupt.size() - 6] ^ 0x5a);
  WriteFile(dir + "/corrupt.gz", corrupt);
  std::string e = ErrorOf([&] { ConvertMnist(dir + "/corrupt.gz", labels, dir + "/db2"); });
  EXPECT_EQ(e.rfind("config: '" + dir + "/corrupt.gz'", 0), 0u) << e;
  EXPECT_FALSE(std::ifstream(dir + "/db2/data.mdb")) << "a half-written DB was left behind";
  WriteFile(dir + "/cut.gz", gz.substr(0, gz.size() - 3));
  e = ErrorOf([&] { ConvertMnist(dir + "/cut.gz", labels, dir + "/db3"); });
  EXPECT_EQ(e.rfind("config: '" + dir + "/cut.gz'", 0), 0u) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return std::string("config: ") + e.what();
  } catch (const RuntimeError& e) {
    return std::string("runtime: ") + e.what();
  }
  return "no error";
}

TEST(ConvertMnistTest, Errors) {
  const std::string dir = testing::TempDir();
  // Named references, not a structured binding: C++17 lambdas cannot capture those.
  const auto idx = MakeIdx(dir, 5);
  const std::string& images = idx.first;
  const std::string& labels = idx.second;
  // Swapped arguments: the magic number names the file.
  std::string e = ErrorOf([&] { ConvertMnist(labels, images, dir + "/db1"); });
  EXPECT_EQ(e.rfind("config: '" + labels + "' is not an MNIST image file", 0), 0u) << e;
  EXPECT_NE(e.find("swap"), std::string::npos) << e;

  const auto other = MakeIdx(testing::TempDir(), 4);
  e = ErrorOf([&] { ConvertMnist(images, other.second, dir + "/db2"); });
  EXPECT_NE(e.find("5 images"), std::string::npos) << e;
  EXPECT_NE(e.find("4 labels"), std::string::npos) << e;

  std::string truncated;
  {
    std::ifstream in(images, std::ios::binary);
    truncated.assign(std::istreambuf_iterator<char>(in), {});
  }
  WriteFile(dir + "/short", truncated.substr(0, truncated.size() - 1));
  e = ErrorOf([&] { ConvertMnist(dir + "/short", labels, dir + "/db3"); });
  EXPECT_EQ(e.rfind("config: '" + dir + "/short' is truncated", 0), 0u) << e;
  ASSERT_EQ(std::system(("gzip -k '" + dir + "/short'").c_str()), 0);
  e = ErrorOf([&] { ConvertMnist(dir + "/short.gz", labels, dir + "/db4"); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_FALSE(std::ifstream(dir + "/db4/data.mdb")) << "a half-written DB was left behind";

  e = ErrorOf([&] { ConvertMnist(dir + "/missing", labels, dir + "/db5"); });
  EXPECT_EQ(e.rfind("runtime: cannot open '" + dir + "/missing'", 0), 0u) << e;

  EXPECT_EQ(ConvertMnist(images, labels, dir + "/db6"), 5);
  e = ErrorOf([&] { ConvertMnist(images, labels, dir + "/db6"); });
  EXPECT_NE(e.find("already exists"), std::string::npos) << e;
}

}  // namespace
}  // namespace crema
