// `crema extract-features` end to end: a Data layer reads 6 float records (batch 2), an
// InnerProduct with weights from a .caffemodel and a Softmax follow; 3 forward passes are saved
// as LMDB, .npy and HDF5 and compared with the net's values computed here in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/proto.hpp"
#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "io/npy.hpp"
#include "support/reference.hpp"
#include "tools/image_tool_util.hpp"

namespace crema::testing {
namespace {

constexpr int kItems = 6, kIn = 4, kOut = 3;

double X(int n, int k) { return 0.5 * n - 0.25 * k + 0.1 * (k == 2 ? n * n : 1); }
double W(int j, int k) { return 0.1 * (j + 1) - 0.07 * k * (j - 1) + 0.01 * j * k * k; }
double B(int j) { return std::vector<double>{0.5, -0.25, 0.125}[j]; }

std::vector<double> Ip(int n) {
  std::vector<double> y(kOut);
  for (int j = 0; j < kOut; ++j) {
    y[j] = static_cast<float>(B(j));
    for (int k = 0; k < kIn; ++k)
      y[j] += static_cast<double>(static_cast<float>(W(j, k))) * static_cast<float>(X(n, k));
  }
  return y;
}

std::vector<double> Prob(int n) {
  std::vector<double> y = Ip(n);
  double max = y[0], sum = 0;
  for (double v : y) max = std::max(max, v);
  for (double& v : y) sum += (v = std::exp(v - max));
  for (double& v : y) v /= sum;
  return y;
}

struct Fixture {
  std::string dir = TempDir();
  std::string model = dir + "/net.prototxt";
  std::string weights = dir + "/net.caffemodel";
  Fixture() {
    // The records: 2 x 1 x 2 float_data each (x_n), label n.
    {
      auto db = db::OpenDB(db::Backend::kLmdb, dir + "/input_lmdb", db::Mode::kNew);
      auto txn = db->NewTransaction();
      for (int n = 0; n < kItems; ++n) {
        Datum datum;
        datum.set_channels(2);
        datum.set_height(1);
        datum.set_width(2);
        for (int k = 0; k < kIn; ++k) datum.add_float_data(static_cast<float>(X(n, k)));
        datum.set_label(n);
        char key[16];
        std::snprintf(key, sizeof(key), "%08d", n);
        txn->Put(key, datum.SerializeAsString());
      }
      txn->Commit();
    }
    WriteText(model,
              "name: \"tiny\"\n"
              "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\"\n"
              "  data_param { source: \"" +
                  dir +
                  "/input_lmdb\" batch_size: 2 "
                  "backend: LMDB } }\n"
                  "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                  "  inner_product_param { num_output: 3 weight_filler { type: \"constant\" "
                  "value: 9 } } }\n"
                  "layer { name: \"prob\" type: \"Softmax\" bottom: \"ip\" top: \"prob\" }\n"
                  "layer { name: \"sink\" type: \"Silence\" bottom: \"label\" }\n");
    NetParameter net;
    LayerParameter* ip = net.add_layer();
    ip->set_name("ip");
    ip->set_type("InnerProduct");
    BlobProto* w = ip->add_blobs();
    w->mutable_shape()->add_dim(kOut);
    w->mutable_shape()->add_dim(kIn);
    for (int j = 0; j < kOut; ++j)
      for (int k = 0; k < kIn; ++k) w->add_data(static_cast<float>(W(j, k)));
    BlobProto* b = ip->add_blobs();
    b->mutable_shape()->add_dim(kOut);
    for (int j = 0; j < kOut; ++j) b->add_data(static_cast<float>(B(j)));
    std::ofstream(weights, std::ios::binary) << net.SerializeAsString();
  }
  CremaResult Extract(const std::string& out, const std::string& format,
                      const std::string& blobs = "ip,prob,data") const {
    return RunCrema("extract-features --model '" + model + "' --weights '" + weights +
                    "' --blobs " + blobs + " --iterations 3 --output '" + dir + "/" + out +
                    "' --format " + format);
  }
};

std::vector<double> Expected(const std::string& blob, int n) {
  if (blob == "ip") return Ip(n);
  if (blob == "prob") return Prob(n);
  std::vector<double> x;
  for (int k = 0; k < kIn; ++k) x.push_back(static_cast<float>(X(n, k)));
  return x;
}

TEST(ExtractFeaturesTest, LmdbRecordsAreCaffes) {
  Fixture f;
  const CremaResult r = f.Extract("lmdb", "lmdb");
  ASSERT_EQ(r.rc, 0) << r.output;
  for (const std::string blob : {"ip", "prob", "data"}) {
    const auto records = ReadDb(f.dir + "/lmdb/" + blob + "_lmdb");
    ASSERT_EQ(records.size(), 6u) << blob;
    for (int n = 0; n < kItems; ++n) {
      char key[16];
      std::snprintf(key, sizeof(key), "%010d", n);
      EXPECT_EQ(records[n].first, key);
      Datum datum;
      ASSERT_TRUE(datum.ParseFromString(records[n].second));
      // Caffe's legacy axes: ip is 2 x 3 -> channels 3, height 1, width 1.
      EXPECT_EQ(datum.channels(), blob == "data" ? 2 : 3) << blob;
      EXPECT_EQ(datum.height(), 1);
      EXPECT_EQ(datum.width(), blob == "data" ? 2 : 1) << blob;
      EXPECT_FALSE(datum.has_label());
      EXPECT_FALSE(datum.has_data());
      EXPECT_FALSE(datum.has_encoded());
      const std::vector<double> expected = Expected(blob, n);
      ASSERT_EQ(datum.float_data_size(), static_cast<int>(expected.size())) << blob;
      for (size_t d = 0; d < expected.size(); ++d)
        EXPECT_NEAR(datum.float_data(static_cast<int>(d)), expected[d], 1e-5)
            << blob << " item " << n << " value " << d;
    }
  }
  EXPECT_NE(r.output.find("ip: 6 items"), std::string::npos) << r.output;
}

TEST(ExtractFeaturesTest, NpyAndHdf5) {
  Fixture f;
  CremaResult r = f.Extract("npy", "npy");
  ASSERT_EQ(r.rc, 0) << r.output;
  r = f.Extract("h5", "hdf5");
  ASSERT_EQ(r.rc, 0) << r.output;
  Hdf5File file(f.dir + "/h5/features.h5", Hdf5File::Mode::kRead);
  for (const std::string blob : {"ip", "prob", "data"}) {
    const NpyArray array = ReadNpy(f.dir + "/npy/" + blob + ".npy");
    EXPECT_EQ(array.descr, "<f4");
    const std::vector<int64_t> shape =
        blob == "data" ? std::vector<int64_t>{6, 2, 1, 2} : std::vector<int64_t>{6, 3};
    EXPECT_EQ(array.shape, shape) << blob;
    Blob h5;
    ReadBlobFromHDF5(file.id(), blob, &h5, /*reshape=*/true);
    EXPECT_EQ(std::vector<int64_t>(h5.shape().begin(), h5.shape().end()), shape) << blob;
    const size_t dim = blob == "data" ? kIn : kOut;
    ASSERT_EQ(array.values.size(), kItems * dim);
    ASSERT_EQ(h5.count(), static_cast<int64_t>(kItems * dim));
    for (int n = 0; n < kItems; ++n) {
      const std::vector<double> expected = Expected(blob, n);
      for (size_t d = 0; d < dim; ++d) {
        EXPECT_NEAR(array.values[n * dim + d], expected[d], 1e-5) << blob << " " << n;
        EXPECT_NEAR(h5.data_at(static_cast<int64_t>(n * dim + d)), expected[d], 1e-5)
            << blob << " " << n;
      }
    }
  }
  EXPECT_EQ(Hdf5ChildNames(file.id()).size(), 3u);
}

TEST(ExtractFeaturesTest, LevelDb) {
  if (!db::HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  Fixture f;
  const CremaResult r = f.Extract("ldb", "leveldb", "prob");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto records = ReadDb(f.dir + "/ldb/prob_leveldb", db::Backend::kLevelDb);
  ASSERT_EQ(records.size(), 6u);
  Datum datum;
  ASSERT_TRUE(datum.ParseFromString(records[5].second));
  EXPECT_EQ(records[5].first, "0000000005");
  ASSERT_EQ(datum.float_data_size(), 3);
  EXPECT_NEAR(datum.float_data(1), Prob(5)[1], 1e-6);
}

TEST(ExtractFeaturesTest, UnknownBlobListsTheNetsBlobs) {
  Fixture f;
  const CremaResult r = f.Extract("bad", "npy", "ip,fc7");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("no blob \"fc7\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data, label, ip, prob"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(f.dir + "/bad/ip.npy"));
}

TEST(ExtractFeaturesTest, FlagErrorsAndNoOverwrite) {
  Fixture f;
  CremaResult r = RunCrema("extract-features --model '" + f.model + "' --blobs ip --output '" +
                           f.dir + "/x' --format npy");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--iterations is required"), std::string::npos) << r.output;
  r = f.Extract("x", "csv");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("--format must be"), std::string::npos) << r.output;

  ASSERT_EQ(f.Extract("twice", "npy", "ip").rc, 0);
  const std::string before = ReadFile(f.dir + "/twice/ip.npy");
  r = f.Extract("twice", "npy", "ip");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("exists already"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(f.dir + "/twice/ip.npy"), before);
  int entries = 0;  // no temporary folder left behind
  for (const auto& e : std::filesystem::directory_iterator(f.dir + "/twice")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

}  // namespace
}  // namespace crema::testing
