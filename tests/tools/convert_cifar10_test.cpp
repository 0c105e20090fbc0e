// `crema convert-cifar10` end to end on synthetic batch files (the binary release's layout:
// 10000 records of a label byte and 3072 pixel bytes per file), the DBs read back.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "io/db.hpp"
#include "support/reference.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

constexpr int kRecords = 10000, kPixels = 3072;
const char* const kBatches[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

int Label(int batch, int item) { return (batch * 7 + item * 3) % 10; }
uint8_t Pixel(int batch, int item, int p) {
  return static_cast<uint8_t>((batch * 31 + item * 13 + p * 7 + p / 1024) % 256);
}

// The 3072 pixel bytes of a record, as stored (R, G, B planes).
std::string Pixels(int batch, int item) {
  std::string bytes(kPixels, '\0');
  for (int p = 0; p < kPixels; ++p) bytes[p] = static_cast<char>(Pixel(batch, item, p));
  return bytes;
}

struct Fixture {
  std::string dir = TempDir();
  std::string in = dir + "/cifar-10-batches-bin";
  std::string out = dir + "/out";
  Fixture() {
    std::filesystem::create_directories(in);
    for (int b = 0; b < 6; ++b) {
      std::string file;
      file.reserve(static_cast<size_t>(kRecords) * (kPixels + 1));
      for (int i = 0; i < kRecords; ++i) {
        file.push_back(static_cast<char>(Label(b, i)));
        file += Pixels(b, i);
      }
      WriteText(in + "/" + kBatches[b], file);
    }
  }
  CremaResult Convert(const std::string& flags = "") const {
    return RunCrema("convert-cifar10 '" + in + "' '" + out + "' " + flags);
  }
  // Nothing at all in the output folder (no DB, no temporary folder).
  bool OutputEmpty() const {
    return !std::filesystem::exists(out) || std::filesystem::is_empty(out);
  }
};

// What Caffe's convert_cifar10_data stores: channels, height, width, data, label, nothing else.
std::string ExpectedRecord(int batch, int item) {
  Datum datum;
  datum.set_channels(3);
  datum.set_height(32);
  datum.set_width(32);
  datum.set_data(Pixels(batch, item));
  datum.set_label(Label(batch, item));
  return datum.SerializeAsString();
}

std::string Key(int index) {
  char key[16];
  std::snprintf(key, sizeof(key), "%05d", index);
  return key;
}

TEST(ConvertCifar10Test, RecordsAreCaffes) {
  Fixture f;
  const CremaResult r = f.Convert();
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto train = ReadDb(f.out + "/cifar10_train_lmdb");
  ASSERT_EQ(train.size(), 50000u);
  for (int b = 0; b < 5; ++b) {
    for (int i = 0; i < kRecords; ++i) {
      const auto& [key, value] = train[b * kRecords + i];
      ASSERT_EQ(key, Key(b * kRecords + i));
      ASSERT_EQ(value, ExpectedRecord(b, i)) << key;
    }
  }
  // Field by field too, for a readable failure.
  Datum datum;
  ASSERT_TRUE(datum.ParseFromString(train[12345].second));
  EXPECT_EQ(datum.channels(), 3);
  EXPECT_EQ(datum.height(), 32);
  EXPECT_EQ(datum.width(), 32);
  EXPECT_EQ(datum.label(), Label(1, 2345));
  EXPECT_FALSE(datum.has_encoded());
  EXPECT_EQ(datum.float_data_size(), 0);
  ASSERT_EQ(datum.data().size(), 3072u);
  EXPECT_EQ(static_cast<uint8_t>(datum.data()[1024 + 5]), Pixel(1, 2345, 1024 + 5));  // G plane

  const auto test = ReadDb(f.out + "/cifar10_test_lmdb");
  ASSERT_EQ(test.size(), 10000u);
  for (int i = 0; i < kRecords; ++i) {
    ASSERT_EQ(test[i].first, Key(i));
    ASSERT_EQ(test[i].second, ExpectedRecord(5, i)) << i;
  }
  // No temporary folder left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(f.out)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);

  // The DBs exist now: a second run refuses to overwrite them.
  const CremaResult again = f.Convert();
  EXPECT_EQ(again.rc, 1) << again.output;
  EXPECT_NE(again.output.find("exists already"), std::string::npos) << again.output;
  EXPECT_EQ(ReadDb(f.out + "/cifar10_test_lmdb").size(), 10000u);
}

TEST(ConvertCifar10Test, LevelDb) {
  if (!db::HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  Fixture f;
  const CremaResult r = f.Convert("--backend leveldb");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto train = ReadDb(f.out + "/cifar10_train_leveldb", db::Backend::kLevelDb);
  ASSERT_EQ(train.size(), 50000u);
  for (int index : {0, 9999, 10000, 31415, 49999}) {
    EXPECT_EQ(train[index].first, Key(index));
    EXPECT_EQ(train[index].second, ExpectedRecord(index / kRecords, index % kRecords));
  }
  const auto test = ReadDb(f.out + "/cifar10_test_leveldb", db::Backend::kLevelDb);
  ASSERT_EQ(test.size(), 10000u);
  EXPECT_EQ(test[9999].second, ExpectedRecord(5, 9999));
}

TEST(ConvertCifar10Test, TruncatedBatchIsAnErrorAndWritesNothing) {
  Fixture f;
  // data_batch_3.bin ends 100 bytes into record 9998.
  std::filesystem::resize_file(f.in + "/data_batch_3.bin", 3073 * 9998 + 100);
  const CremaResult r = f.Convert();
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.in + "/data_batch_3.bin"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("record 9998"), std::string::npos) << r.output;
  EXPECT_TRUE(f.OutputEmpty());
}

TEST(ConvertCifar10Test, MissingBatchIsAnError) {
  Fixture f;
  std::filesystem::remove(f.in + "/test_batch.bin");
  const CremaResult r = f.Convert();
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(f.in + "/test_batch.bin"), std::string::npos) << r.output;
  EXPECT_TRUE(f.OutputEmpty());
}

TEST(ConvertCifar10Test, BadLabelMidwayRemovesThePartialDbs) {
  Fixture f;
  // The training DB is complete and the test DB half written when record 5000 of the test
  // batch turns out to have label 10.
  {
    std::fstream file(f.in + "/test_batch.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(3073 * 5000);
    file.put(10);
  }
  const CremaResult r = f.Convert();
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("test_batch.bin': record 5000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("label 10"), std::string::npos) << r.output;
  EXPECT_TRUE(f.OutputEmpty());
}

// data/cifar10/get_cifar10.sh on a cifar-10-binary.tar.gz of the synthetic batches: the DBs
// and the mean of the training images, computed here.
TEST(ConvertCifar10Test, GetCifar10Script) {
  Fixture f;
  const std::string data = f.dir + "/data/cifar10";
  std::filesystem::create_directories(data);
  std::filesystem::copy_file(std::string(CREMA_SOURCE_DIR) + "/data/cifar10/get_cifar10.sh",
                             data + "/get_cifar10.sh");
  const std::string tarball = f.dir + "/cifar-10-binary.tar.gz";
  ASSERT_EQ(
      std::system(("tar -czf '" + tarball + "' -C '" + f.dir + "' cifar-10-batches-bin").c_str()),
      0);
  const std::string command = "bash '" + data + "/get_cifar10.sh' '" + tarball + "' '" +
                              std::string(CREMA_BINARY_DIR) + "/crema' > '" + f.dir + "/log' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadFile(f.dir + "/log");
  EXPECT_EQ(ReadDb(data + "/cifar10_train_lmdb").size(), 50000u);
  const auto test = ReadDb(data + "/cifar10_test_lmdb");
  ASSERT_EQ(test.size(), 10000u);
  EXPECT_EQ(test[77].second, ExpectedRecord(5, 77));

  BlobProto mean;
  ASSERT_TRUE(mean.ParseFromString(ReadFile(data + "/mean.binaryproto")));
  EXPECT_EQ(mean.num(), 1);
  EXPECT_EQ(mean.channels(), 3);
  EXPECT_EQ(mean.height(), 32);
  EXPECT_EQ(mean.width(), 32);
  std::vector<double> sum(kPixels, 0.0);
  for (int b = 0; b < 5; ++b)
    for (int i = 0; i < kRecords; ++i)
      for (int p = 0; p < kPixels; ++p) sum[p] += Pixel(b, i, p);
  ASSERT_EQ(mean.data_size(), kPixels);
  for (int p = 0; p < kPixels; ++p) ASSERT_NEAR(mean.data(p), sum[p] / 50000, 1e-4) << p;
}

TEST(ConvertCifar10Test, Usage) {
  const CremaResult r = RunCrema("convert-cifar10 only_one_argument");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("takes 2 arguments"), std::string::npos) << r.output;
  const CremaResult help = RunCrema("convert-cifar10 --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.output.find("cifar10_train_<backend>"), std::string::npos) << help.output;
}

}  // namespace
}  // namespace crema::testing
