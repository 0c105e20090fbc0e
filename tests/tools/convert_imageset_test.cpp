// `crema convert-imageset` end to end: images written to a temporary folder, converted, and the
// Datum records read back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "support/reference.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

// Image i: 4 x 5 RGB, pixel (h, w) = (R, G, B) = (10 * i + h, 100 + w, 200 + i + h * w).
std::vector<uint8_t> Rgb(int i, int height = 4, int width = 5) {
  std::vector<uint8_t> p;
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w)
      for (int v : {10 * i + h, 100 + w, 200 + i + h * w}) p.push_back(static_cast<uint8_t>(v));
  return p;
}

// Caffe's raw Datum: C x H x W planes in BGR order.
std::string Chw(int i, int height = 4, int width = 5) {
  const std::vector<uint8_t> rgb = Rgb(i, height, width);
  std::string bytes;
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < height; ++h)
      for (int w = 0; w < width; ++w)
        bytes.push_back(static_cast<char>(rgb[(h * width + w) * 3 + (2 - c)]));
  return bytes;
}

struct Fixture {
  std::string dir = TempDir();
  std::string root = dir + "/images/";
  std::string list = dir + "/list.txt";
  Fixture() {
    EXPECT_EQ(std::system(("mkdir -p '" + root + "sub'").c_str()), 0);
    WritePng(root + "a.png", 4, 5, 3, Rgb(0));
    WritePng(root + "b.png", 4, 5, 3, Rgb(1));
    WritePng(root + "sub/c.png", 4, 5, 3, Rgb(2));
    WriteText(list, "a.png 0\nb.png 1\r\n\nsub/c.png 7\n");
  }
  CremaResult Convert(const std::string& db, const std::string& flags = "") const {
    return RunCrema("convert-imageset '" + root + "' '" + list + "' '" + dir + "/" + db + "' " +
                    flags);
  }
};

TEST(ConvertImagesetTest, RawRecordsAreCaffes) {
  Fixture f;
  const CremaResult r = f.Convert("db");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("wrote 3 records"), std::string::npos) << r.output;
  const auto records = ReadDb(f.dir + "/db");
  ASSERT_EQ(records.size(), 3u);
  const char* keys[] = {"00000000_a.png", "00000001_b.png", "00000002_sub/c.png"};
  const int labels[] = {0, 1, 7};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(records[i].first, keys[i]);
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[i].second));
    EXPECT_EQ(datum.channels(), 3);
    EXPECT_EQ(datum.height(), 4);
    EXPECT_EQ(datum.width(), 5);
    EXPECT_EQ(datum.label(), labels[i]);
    EXPECT_EQ(datum.data(), Chw(i));
    // Byte for byte what Caffe's CVMatToDatum writes: encoded is set (to false).
    Datum expected;
    expected.set_channels(3);
    expected.set_height(4);
    expected.set_width(5);
    expected.set_data(Chw(i));
    expected.set_label(labels[i]);
    expected.set_encoded(false);
    EXPECT_EQ(records[i].second, expected.SerializeAsString());
  }
}

TEST(ConvertImagesetTest, GrayResizeAndLevelDb) {
  Fixture f;
  WritePng(f.root + "a.png", 3, 7, 1, std::vector<uint8_t>(21, 77));
  WritePng(f.root + "b.png", 5, 2, 3, std::vector<uint8_t>(30, 140));  // R = G = B
  WriteText(f.list, "a.png 3\nb.png 4\n");
  if (!db::HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  const CremaResult r =
      f.Convert("db", "--gray --resize_width 6 --resize_height 8 --backend leveldb --check_size");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(f.dir + "/db", db::Backend::kLevelDb);
  ASSERT_EQ(records.size(), 2u);
  const int values[] = {77, 140};
  for (int i = 0; i < 2; ++i) {
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[i].second));
    EXPECT_EQ(datum.channels(), 1);
    EXPECT_EQ(datum.height(), 8);
    EXPECT_EQ(datum.width(), 6);
    EXPECT_EQ(datum.label(), 3 + i);
    EXPECT_EQ(datum.data(), std::string(48, static_cast<char>(values[i])));
  }
}

TEST(ConvertImagesetTest, EncodedKeepsOrReencodesTheFile) {
  Fixture f;
  CremaResult r = f.Convert("png", "--encoded");
  ASSERT_EQ(r.rc, 0) << r.output;
  auto records = ReadDb(f.dir + "/png");
  ASSERT_EQ(records.size(), 3u);
  Datum datum;
  ASSERT_TRUE(datum.ParseFromString(records[1].second));
  EXPECT_TRUE(datum.encoded());
  EXPECT_FALSE(datum.has_channels());
  EXPECT_EQ(datum.label(), 1);
  EXPECT_EQ(datum.data(), ReadFile(f.root + "b.png"));  // the file itself, as Caffe stores it

  // Re-encoded as JPEG: decodable, close to the pixels (a flat image, so JPEG is near exact).
  WritePng(f.root + "a.png", 8, 8, 3, std::vector<uint8_t>(8 * 8 * 3, 90));
  WriteText(f.list, "a.png 5\n");
  r = f.Convert("jpg", "--encode_type jpg");
  ASSERT_EQ(r.rc, 0) << r.output;
  records = ReadDb(f.dir + "/jpg");
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(datum.ParseFromString(records[0].second));
  EXPECT_TRUE(datum.encoded());
  EXPECT_EQ(datum.data().substr(0, 2), "\xff\xd8");
  DataTransformer transformer(TransformationParameter(), TEST);
  ASSERT_EQ(transformer.InferBlobShape(datum), (std::vector<int>{1, 3, 8, 8}));
  std::vector<float> pixels(3 * 8 * 8);
  transformer.Transform(datum, pixels.data());
  for (float v : pixels) EXPECT_NEAR(v, 90, 2);
}

TEST(ConvertImagesetTest, MissingAndCorruptImagesAreSkipped) {
  Fixture f;
  WriteText(f.root + "bad.png", "this is not a png");
  WriteText(f.list, "a.png 0\nmissing.png 1\nbad.png 2\nb.png 3\n");
  const CremaResult r = f.Convert("db");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find(f.root + "missing.png"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no such file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(f.root + "bad.png"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("skipped 2 images"), std::string::npos) << r.output;
  const auto records = ReadDb(f.dir + "/db");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].first, "00000000_a.png");
  EXPECT_EQ(records[1].first, "00000003_b.png");  // keys keep the line index, as Caffe's
}

TEST(ConvertImagesetTest, BadArgumentsAndLists) {
  Fixture f;
  WriteText(f.list, "a.png 0\nb.png\n");
  CremaResult r = f.Convert("db");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find(f.list + ":2"), std::string::npos) << r.output;
  WriteText(f.list, "a.png zero\n");
  r = f.Convert("db");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("a.png zero"), std::string::npos) << r.output;
  r = RunCrema("convert-imageset '" + f.root + "' '" + f.dir + "/nolist.txt' '" + f.dir + "/db'");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.dir + "/nolist.txt"), std::string::npos) << r.output;
  r = RunCrema("convert-imageset '" + f.root + "' '" + f.list + "'");
  EXPECT_EQ(r.rc, 2) << r.output;
  // The DB must not exist yet.
  WriteText(f.list, "a.png 0\n");
  ASSERT_EQ(f.Convert("db").rc, 0);
  r = f.Convert("db");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("already exists"), std::string::npos) << r.output;
  // --check_size: images of another size are an error naming the image.
  WritePng(f.root + "b.png", 2, 2, 3, Rgb(1, 2, 2));
  WriteText(f.list, "a.png 0\nb.png 1\n");
  r = f.Convert("db2", "--check_size");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.root + "b.png"), std::string::npos) << r.output;
  r = f.Convert("db3", "--backend rocksdb");
  EXPECT_EQ(r.rc, 2) << r.output;
  r = RunCrema("convert-imageset --help");
  EXPECT_EQ(r.rc, 0) << r.output;
  for (const char* flag : {"--gray", "--shuffle", "--backend", "--resize_width", "--resize_height",
                           "--check_size", "--encoded", "--encode_type"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << "\n" << r.output;
}

TEST(ConvertImagesetTest, PlainLinesOffATerminalLiveLineWithProgressOn) {
  Fixture f;
  std::string list;
  for (int i = 0; i < 1001; ++i) list += "a.png " + std::to_string(i % 3) + "\n";
  list += "missing.png 1\n";
  WriteText(f.list, list);
  // Output to a pipe (as here): the lines of before, every 1000 records, no terminal codes.
  CremaResult r = f.Convert("plain");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("a total of 1002 images\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("processed 1000 files\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("processed 1001"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing.png' (line 1002 of the list as read)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("wrote 1001 records"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\033'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("images/s"), std::string::npos) << r.output;
  // --progress on: the live line (redrawn with \r), ending at the full count; the warning above
  // it; no "processed" lines.
  r = f.Convert("live", "--progress on");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output.find("processed 1000 files"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\r\033[2K"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("] 1002/1002 images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("missing.png' (line 1002"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote 1001 records"), std::string::npos) << r.output;
  EXPECT_EQ(ReadDb(f.dir + "/live").size(), 1001u);
  r = f.Convert("bad", "--progress sometimes");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--progress must be auto, on or off"), std::string::npos) << r.output;
}

TEST(ConvertImagesetTest, ShuffleKeepsEveryImage) {
  Fixture f;
  std::ostringstream list;
  for (int i = 0; i < 20; ++i) {
    WritePng(f.root + std::to_string(i) + ".png", 2, 2, 3, Rgb(i, 2, 2));
    list << i << ".png " << i << "\n";
  }
  WriteText(f.list, list.str());
  const CremaResult r = f.Convert("db", "--shuffle");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(f.dir + "/db");
  ASSERT_EQ(records.size(), 20u);
  std::set<int> labels;
  bool moved = false;
  for (size_t k = 0; k < records.size(); ++k) {
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[k].second));
    EXPECT_EQ(records[k].first.substr(9), std::to_string(datum.label()) + ".png");
    EXPECT_EQ(datum.data(), Chw(datum.label(), 2, 2));
    labels.insert(datum.label());
    moved |= datum.label() != static_cast<int>(k);
  }
  EXPECT_EQ(labels.size(), 20u);
  EXPECT_TRUE(moved);
}

// The first entries of the real CIFAR-10 JPEG list, checked against OpenCV's decoding of the
// same files (through the transformer's decoder for encoded Datums).
TEST(ConvertImagesetTest, Cifar10JpegsMatchOpenCvDecoding) {
  CREMA_REQUIRE_REFERENCE(archive, "real/datasets/cifar10/cifar10_jpeg_train_test.tar.gz");
  const std::string dir = TempDir();
  ASSERT_EQ(std::system(("tar xzf '" + archive + "' -C '" + dir + "' test.txt").c_str()), 0);
  std::ifstream in(dir + "/test.txt");
  std::string line, members, list;
  for (int i = 0; i < 6 && std::getline(in, line); ++i) {
    list += line + "\n";
    members += " '" + line.substr(0, line.rfind(' ')) + "'";
  }
  ASSERT_EQ(std::system(("tar xzf '" + archive + "' -C '" + dir + "'" + members).c_str()), 0);
  WriteText(dir + "/list.txt", list);
  const CremaResult r =
      RunCrema("convert-imageset '" + dir + "/' '" + dir + "/list.txt' '" + dir + "/db'");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(dir + "/db");
  ASSERT_EQ(records.size(), 6u);
  std::istringstream lines(list);
  DataTransformer transformer(TransformationParameter(), TEST);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    const std::string path = line.substr(0, line.rfind(' '));
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[i].second));
    char key[16];
    std::snprintf(key, sizeof(key), "%08d_", i);
    EXPECT_EQ(records[i].first, key + path);
    EXPECT_EQ(datum.label(), std::atoi(line.c_str() + line.rfind(' ') + 1));
    ASSERT_EQ(datum.channels(), 3);
    ASSERT_EQ(datum.height(), 32);
    ASSERT_EQ(datum.width(), 32);
    Datum file;
    file.set_encoded(true);
    file.set_data(ReadFile(dir + "/" + path));
    std::vector<float> decoded(3 * 32 * 32);
    transformer.Transform(file, decoded.data());
    for (int k = 0; k < 3 * 32 * 32; ++k)
      ASSERT_EQ(static_cast<uint8_t>(datum.data()[k]), decoded[k]) << path << " " << k;
  }
}

}  // namespace
}  // namespace crema::testing
