// `crema compute-image-mean` end to end: DBs written by convert-imageset (raw and encoded) and
// directly through io/db, and the mean compared with a direct computation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "io/db.hpp"
#include "support/reference.hpp"
#include "support/requires.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

constexpr int kH = 3, kW = 4;

// Image i: (R, G, B) at (h, w) = (7 * i + h * w, 50 + 3 * i + w, 255 - 11 * i - h).
std::vector<uint8_t> Rgb(int i) {
  std::vector<uint8_t> p;
  for (int h = 0; h < kH; ++h)
    for (int w = 0; w < kW; ++w)
      for (int v : {7 * i + h * w, 50 + 3 * i + w, 255 - 11 * i - h})
        p.push_back(static_cast<uint8_t>(v));
  return p;
}

// The mean, C x H x W in BGR order, accumulated in float as Caffe does.
std::vector<float> DirectMean(int n) {
  std::vector<float> sum(3 * kH * kW, 0.0f);
  for (int i = 0; i < n; ++i) {
    const std::vector<uint8_t> rgb = Rgb(i);
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) sum[(c * kH + h) * kW + w] += rgb[(h * kW + w) * 3 + (2 - c)];
  }
  for (float& v : sum) v /= static_cast<float>(n);
  return sum;
}

BlobProto ReadMean(const std::string& path) {
  BlobProto proto;
  EXPECT_TRUE(proto.ParseFromString(ReadFile(path))) << path;
  return proto;
}

struct Fixture {
  std::string dir = TempDir();
  int n = 5;
  Fixture() {
    std::string list;
    for (int i = 0; i < n; ++i) {
      WritePng(dir + "/" + std::to_string(i) + ".png", kH, kW, 3, Rgb(i));
      list += std::to_string(i) + ".png " + std::to_string(i % 2) + "\n";
    }
    WriteText(dir + "/list.txt", list);
  }
  void Convert(const std::string& db, const std::string& flags = "") const {
    const CremaResult r = RunCrema("convert-imageset '" + dir + "/' '" + dir + "/list.txt' '" +
                                   dir + "/" + db + "' " + flags);
    ASSERT_EQ(r.rc, 0) << r.output;
  }
};

TEST(ComputeImageMeanTest, MeanOfRawRecordsMatchesDirectComputation) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  f.Convert("db");
  const CremaResult r = RunCrema("compute-image-mean '" + f.dir + "/db' '" + f.dir + "/mean'");
  ASSERT_EQ(r.rc, 0) << r.output;
  const BlobProto mean = ReadMean(f.dir + "/mean");
  // Caffe's layout: the legacy num/channels/height/width fields, no shape.
  EXPECT_FALSE(mean.has_shape());
  EXPECT_EQ(mean.num(), 1);
  EXPECT_EQ(mean.channels(), 3);
  EXPECT_EQ(mean.height(), kH);
  EXPECT_EQ(mean.width(), kW);
  const std::vector<float> expected = DirectMean(f.n);
  ASSERT_EQ(mean.data_size(), static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(mean.data(i), expected[i]) << i;
  // The per-channel means are printed, as Caffe's tool logs them.
  for (int c = 0; c < 3; ++c) {
    float channel = 0;
    for (int i = 0; i < kH * kW; ++i) channel += expected[c * kH * kW + i];
    char text[64];
    std::snprintf(text, sizeof(text), "mean_value channel [%d]: %g", c,
                  static_cast<double>(channel / (kH * kW)));
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
}

TEST(ComputeImageMeanTest, EncodedRecordsAndLevelDbGiveTheSameMean) {
  CREMA_SKIP_WITHOUT_OPENCV();
  Fixture f;
  f.Convert("raw");
  f.Convert("encoded", "--encoded");
  ASSERT_EQ(RunCrema("compute-image-mean '" + f.dir + "/raw' '" + f.dir + "/raw.binaryproto'").rc,
            0);
  const CremaResult r =
      RunCrema("compute-image-mean '" + f.dir + "/encoded' '" + f.dir + "/enc.binaryproto'");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(ReadFile(f.dir + "/enc.binaryproto"), ReadFile(f.dir + "/raw.binaryproto"));
  if (!db::HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  f.Convert("level", "--backend leveldb");
  ASSERT_EQ(RunCrema("compute-image-mean --backend leveldb '" + f.dir + "/level' '" + f.dir +
                     "/level.binaryproto'")
                .rc,
            0);
  EXPECT_EQ(ReadFile(f.dir + "/level.binaryproto"), ReadFile(f.dir + "/raw.binaryproto"));
}

TEST(ComputeImageMeanTest, FloatDataRecordsWithoutOutputFile) {
  const std::string dir = TempDir();
  {
    auto db = db::OpenDB(db::Backend::kLmdb, dir + "/db", db::Mode::kNew);
    auto txn = db->NewTransaction();
    for (int i = 0; i < 2; ++i) {
      Datum datum;
      datum.set_channels(2);
      datum.set_height(1);
      datum.set_width(2);
      for (int k = 0; k < 4; ++k) datum.add_float_data(0.5f * k + i);
      txn->Put("k" + std::to_string(i), datum.SerializeAsString());
    }
    txn->Commit();
  }
  const CremaResult r = RunCrema("compute-image-mean '" + dir + "/db'");
  ASSERT_EQ(r.rc, 0) << r.output;
  // Channel 0: (0 + 0.5 + 1 + 1.5) / 4 = 0.75; channel 1: (1 + 1.5 + 2 + 2.5) / 4 = 1.75.
  EXPECT_NE(r.output.find("mean_value channel [0]: 0.75"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mean_value channel [1]: 1.75"), std::string::npos) << r.output;
}

TEST(ComputeImageMeanTest, Errors) {
  const std::string dir = TempDir();
  CremaResult r = RunCrema("compute-image-mean '" + dir + "/missing'");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(dir + "/missing"), std::string::npos) << r.output;
  r = RunCrema("compute-image-mean");
  EXPECT_EQ(r.rc, 2) << r.output;
  {
    auto db = db::OpenDB(db::Backend::kLmdb, dir + "/mixed", db::Mode::kNew);
    auto txn = db->NewTransaction();
    for (int i = 0; i < 2; ++i) {
      Datum datum;
      datum.set_channels(1);
      datum.set_height(1);
      datum.set_width(2 + i);
      datum.set_data(std::string(2 + i, '\x01'));
      txn->Put("k" + std::to_string(i), datum.SerializeAsString());
    }
    txn->Put("k2", "\xff\xff\xff");
    txn->Commit();
  }
  r = RunCrema("compute-image-mean '" + dir + "/mixed'");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("'k1'"), std::string::npos) << r.output;
  r = RunCrema("compute-image-mean --help");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("--backend"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crema::testing
