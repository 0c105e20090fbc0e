#include "layers/data/data_layer.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <lmdb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/layer_registry.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

// Records read with LMDB's C API directly, independent of io/db.
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

std::string Key(int i) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08d", i);
  return buffer;
}

constexpr int kC = 2, kH = 5, kW = 6;
uint8_t Pixel(int item, int c, int h, int w) {
  return static_cast<uint8_t>((item * 37 + c * 101 + h * 13 + w * 3) % 256);
}

// A crema-written LMDB of `n` synthetic C x H x W records (label = 10 + item); record
// `corrupt_at` (if >= 0) holds bytes that are no Datum.
std::string MakeDb(int n, int corrupt_at = -1, db::Backend backend = db::Backend::kLmdb) {
  const std::string path = testing::TempDir() + "/db";
  auto db = db::OpenDB(backend, path, db::Mode::kNew);
  auto txn = db->NewTransaction();
  for (int item = 0; item < n; ++item) {
    Datum datum;
    datum.set_channels(kC);
    datum.set_height(kH);
    datum.set_width(kW);
    std::string bytes;
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) bytes.push_back(static_cast<char>(Pixel(item, c, h, w)));
    datum.set_data(bytes);
    datum.set_label(10 + item);
    txn->Put(Key(item),
             item == corrupt_at ? std::string("\xff\xff\xff\xff", 4) : datum.SerializeAsString());
  }
  txn->Commit();
  return path;
}

struct Harness {
  explicit Harness(const std::string& text, Phase phase = TRAIN, DataType type = DataType::kFloat32)
      : data(type), label(type) {
    LayerParameter param;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
    param.set_phase(phase);
    layer = LayerRegistry::Create(param);
    layer->set_dtype(type);
  }
  void SetUp() { layer->SetUp({}, top()); }
  void Forward() { layer->Forward({}, top()); }
  BlobVec top() { return {&data, &label}; }
  std::unique_ptr<Layer> layer;
  Blob data, label;
};

std::string DataParam(const std::string& source, int batch, const std::string& extra = "",
                      const std::string& data_extra = "") {
  return "name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" + source +
         "' batch_size: " + std::to_string(batch) + " backend: LMDB " + data_extra + "} " + extra;
}

TEST(DataLayerTest, FashionMnistBatchesMatchTheRecords) {
  CREMA_REQUIRE_REFERENCE(source, "bvlc/fmnist_small/train_lmdb");
  const auto records = ReadLmdb(source);
  ASSERT_EQ(records.size(), 1000u);
  for (DataType type : {DataType::kFloat32, DataType::kFloat64}) {
    Harness h(DataParam(source, 64, "transform_param { scale: 0.00390625 }"), TRAIN, type);
    h.SetUp();
    EXPECT_EQ(h.data.shape(), (std::vector<int>{64, 1, 28, 28}));
    EXPECT_EQ(h.label.shape(), (std::vector<int>{64}));
    for (int batch = 0; batch < 3; ++batch) {
      h.Forward();
      for (int item = 0; item < 64; ++item) {
        Datum datum;
        ASSERT_TRUE(datum.ParseFromString(records[batch * 64 + item].second));
        ASSERT_EQ(datum.data().size(), 784u);
        EXPECT_EQ(h.label.data_at(item), datum.label());
        for (int i = 0; i < 784; ++i) {
          const uint8_t pixel = static_cast<uint8_t>(datum.data()[i]);
          const double expected = type == DataType::kFloat32
                                      ? static_cast<double>(pixel * 0.00390625f)
                                      : pixel * static_cast<double>(0.00390625f);
          ASSERT_EQ(h.data.data_at(item * 784 + i), expected) << batch << " " << item << " " << i;
        }
      }
    }
  }
}

TEST(DataLayerTest, WrapsAroundAfterTheLastRecord) {
  CREMA_REQUIRE_REFERENCE(source, "bvlc/fmnist_small/train_lmdb");
  const auto records = ReadLmdb(source);
  Harness h(DataParam(source, 300), TEST);
  h.SetUp();
  for (int batch = 0; batch < 5; ++batch) {
    h.Forward();
    for (int item = 0; item < 300; item += 7) {
      Datum datum;
      ASSERT_TRUE(datum.ParseFromString(records[(batch * 300 + item) % 1000].second));
      ASSERT_EQ(h.label.data_at(item), datum.label()) << batch << " " << item;
      ASSERT_EQ(h.data.data_at(item * 784 + 400), static_cast<uint8_t>(datum.data()[400]));
    }
  }
}

TEST(DataLayerTest, CremaWrittenDbRoundTrips) {
  const std::string source = MakeDb(10);
  Harness h(DataParam(source, 4), TRAIN);
  h.SetUp();
  EXPECT_EQ(h.data.shape(), (std::vector<int>{4, kC, kH, kW}));
  for (int batch = 0; batch < 4; ++batch) {
    h.Forward();
    for (int item = 0; item < 4; ++item) {
      const int record = (batch * 4 + item) % 10;
      EXPECT_EQ(h.label.data_at(item), 10 + record);
      for (int c = 0; c < kC; ++c)
        for (int y = 0; y < kH; ++y)
          for (int x = 0; x < kW; ++x)
            ASSERT_EQ(h.data.data_at(h.data.offset(item, c, y, x)), Pixel(record, c, y, x));
    }
  }
}

TEST(DataLayerTest, ReadsLevelDb) {
  if (!db::HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  const std::string source = MakeDb(5, -1, db::Backend::kLevelDb);
  // Backend unset: LEVELDB, Caffe's default.
  Harness h("name: 'data' type: 'Data' top: 'data' top: 'label' data_param { source: '" + source +
            "' batch_size: 3 }");
  h.SetUp();
  EXPECT_EQ(h.data.shape(), (std::vector<int>{3, kC, kH, kW}));
  for (int batch = 0; batch < 2; ++batch) {
    h.Forward();
    for (int item = 0; item < 3; ++item) {
      const int record = (batch * 3 + item) % 5;
      EXPECT_EQ(h.label.data_at(item), 10 + record);
      ASSERT_EQ(h.data.data_at(h.data.offset(item, 1, 4, 5)), Pixel(record, 1, 4, 5));
    }
  }
}

TEST(DataLayerTest, WithoutLabelTop) {
  const std::string source = MakeDb(3);
  LayerParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "name: 'd' type: 'Data' top: 'data' data_param { source: '" + source +
          "' batch_size: 2 backend: LMDB prefetch: 1 }",
      &param));
  auto layer = LayerRegistry::Create(param);
  Blob data;
  layer->SetUp({}, {&data});
  layer->Forward({}, {&data});
  layer->Forward({}, {&data});
  EXPECT_EQ(data.data_at(data.offset(0)), Pixel(2, 0, 0, 0));
  EXPECT_EQ(data.data_at(data.offset(1)), Pixel(0, 0, 0, 0));
}

TEST(DataLayerTest, CenterCropAndMeanInTest) {
  const std::string source = MakeDb(6);
  Harness h(DataParam(source, 3,
                      "transform_param { crop_size: 3 mean_value: 100 mean_value: 50 "
                      "scale: 0.5 }"),
            TEST);
  h.SetUp();
  EXPECT_EQ(h.data.shape(), (std::vector<int>{3, kC, 3, 3}));
  const int h_off = (kH - 3) / 2, w_off = (kW - 3) / 2;
  for (int batch = 0; batch < 2; ++batch) {
    h.Forward();
    for (int item = 0; item < 3; ++item)
      for (int c = 0; c < kC; ++c)
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 3; ++x)
            ASSERT_EQ(
                h.data.data_at(h.data.offset(item, c, y, x)),
                (Pixel(batch * 3 + item, c, y + h_off, x + w_off) - (c == 0 ? 100 : 50)) * 0.5);
  }
}

TEST(DataLayerTest, MeanFile) {
  const std::string source = MakeDb(2);
  BlobProto mean;
  for (int d : {1, kC, kH, kW}) mean.mutable_shape()->add_dim(d);
  for (int i = 0; i < kC * kH * kW; ++i) mean.add_data(i * 0.25f);
  const std::string mean_path = testing::TempDir() + "/mean.binaryproto";
  std::ofstream(mean_path, std::ios::binary) << mean.SerializeAsString();
  Harness h(DataParam(source, 2, "transform_param { mean_file: '" + mean_path + "' }"), TEST);
  h.SetUp();
  h.Forward();
  for (int item = 0; item < 2; ++item)
    for (int i = 0; i < kC * kH * kW; ++i) {
      const int c = i / (kH * kW), y = i / kW % kH, x = i % kW;
      ASSERT_EQ(h.data.data_at(item * kC * kH * kW + i), Pixel(item, c, y, x) - i * 0.25f);
    }
}

// Collects the data of `batches` forwards of a TRAIN layer with random crops and mirrors.
std::vector<double> RandomRun(const std::string& source, int seed, int batches) {
  SetRandomSeed(seed);
  Harness h(DataParam(source, 5, "transform_param { crop_size: 3 mirror: true }"), TRAIN);
  h.SetUp();
  std::vector<double> values;
  for (int b = 0; b < batches; ++b) {
    h.Forward();
    for (int64_t i = 0; i < h.data.count(); ++i) values.push_back(h.data.data_at(i));
  }
  return values;
}

TEST(DataLayerTest, RandomCropAndMirrorInTrain) {
  const std::string source = MakeDb(5);
  const std::vector<double> values = RandomRun(source, 1701, 8);
  // Every item is some 3x3 window of its record, maybe mirrored; over 40 items several
  // windows and both orientations occur.
  std::set<int> windows;
  int mirrored = 0;
  const int item_size = kC * 3 * 3;
  for (int n = 0; n < 40; ++n) {
    const int record = n % 5;
    bool found = false;
    for (int h_off = 0; h_off <= kH - 3 && !found; ++h_off)
      for (int w_off = 0; w_off <= kW - 3 && !found; ++w_off)
        for (int mirror = 0; mirror < 2 && !found; ++mirror) {
          bool match = true;
          for (int c = 0; c < kC && match; ++c)
            for (int y = 0; y < 3 && match; ++y)
              for (int x = 0; x < 3 && match; ++x)
                match = values[n * item_size + (c * 3 + y) * 3 + (mirror ? 2 - x : x)] ==
                        Pixel(record, c, y + h_off, x + w_off);
          if (match) {
            found = true;
            windows.insert(h_off * 10 + w_off);
            mirrored += mirror;
          }
        }
    ASSERT_TRUE(found) << "item " << n << " is no crop of record " << record;
  }
  EXPECT_GT(windows.size(), 3u);
  EXPECT_GT(mirrored, 3);
  EXPECT_LT(mirrored, 37);
  // A seed fixes the sequence; another seed changes it.
  EXPECT_EQ(RandomRun(source, 1701, 8), values);
  EXPECT_NE(RandomRun(source, 1702, 8), values);
}

TEST(DataLayerTest, RandSkipIsSeededAndWraps) {
  const std::string source = MakeDb(7);
  auto first_label = [&](int seed) {
    SetRandomSeed(seed);
    Harness h(DataParam(source, 3, "", "rand_skip: 5"), TRAIN);
    h.SetUp();
    h.Forward();
    const int first = static_cast<int>(h.label.data_at(0)) - 10;
    for (int i = 1; i < 3; ++i) EXPECT_EQ(h.label.data_at(i) - 10, (first + i) % 7);
    return first;
  };
  std::set<int> firsts;
  for (int seed = 0; seed < 20; ++seed) {
    const int first = first_label(seed);
    EXPECT_LT(first, 5);
    EXPECT_EQ(first_label(seed), first);
    firsts.insert(first);
  }
  EXPECT_GT(firsts.size(), 1u);
}

TEST(DataLayerTest, Errors) {
  const std::string missing = testing::TempDir() + "/no_such_lmdb";
  try {
    Harness h(DataParam(missing, 4));
    h.SetUp();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("layer \"data\" (Data)"), std::string::npos) << e.what();
  }
  const std::string source = MakeDb(4, /*corrupt_at=*/2);
  {
    // Backend unset: Caffe's default is LevelDB, but the source is an LMDB; the hint says LMDB.
    Harness h("name: 'data' type: 'Data' top: 'data' data_param { source: '" + source +
              "' batch_size: 2 }");
    try {
      h.SetUp();
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      if (!db::HasLevelDb()) {
        EXPECT_NE(std::string(e.what()).find("without LevelDB"), std::string::npos) << e.what();
      }
      EXPECT_NE(std::string(e.what()).find("backend: LMDB"), std::string::npos) << e.what();
    }
  }
  {
    Harness h(DataParam(source, 2, "transform_param { mean_file: 'm' mean_value: 1 }"));
    EXPECT_THROW(h.SetUp(), ConfigError);
  }
  {
    Harness h(DataParam(source, 2, "transform_param { crop_size: 6 }"));  // H is 5
    EXPECT_THROW(h.SetUp(), ConfigError);
  }
  {
    Harness h(DataParam(source, 0));
    EXPECT_THROW(h.SetUp(), ConfigError);
  }
  {
    // The corrupt record 00000002 is met by the prefetch thread; Forward reports it, every time.
    Harness h(DataParam(source, 2));
    h.SetUp();
    h.Forward();
    for (int i = 0; i < 2; ++i) {
      try {
        h.Forward();
        FAIL() << "no error";
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find("00000002"), std::string::npos) << e.what();
      }
    }
  }
  {
    // A corrupt first record fails at set-up.
    const std::string bad_first = MakeDb(2, /*corrupt_at=*/0);
    Harness h(DataParam(bad_first, 2));
    try {
      h.SetUp();
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("00000000"), std::string::npos) << e.what();
    }
  }
}

// ---- encoded images, the decode pool, bad records, shards ----

constexpr int kJpegH = 24, kJpegW = 20;
// A smooth BGR picture (JPEG keeps it close), different for every record.
std::vector<uint8_t> JpegPlanes(int item) {
  std::vector<uint8_t> planes;
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < kJpegH; ++h)
      for (int w = 0; w < kJpegW; ++w)
        planes.push_back(static_cast<uint8_t>(20 + c * 50 + h * 2 + w * 2 + item * 3));
  return planes;
}

Datum JpegDatum(int item) {
  Datum datum;
  datum.set_data(EncodeImage(JpegPlanes(item).data(), 3, kJpegH, kJpegW, ".jpg"));
  datum.set_encoded(true);
  datum.set_label(100 + item);
  return datum;
}

// Record kinds for MakeMixedDb.
enum class Kind { kJpeg, kTruncatedDatum, kCorruptJpeg, kNotADatum };

// An LMDB of JPEG records (label 100 + item), with the given kinds at some positions.
std::string MakeMixedDb(const std::string& name, int n,
                        const std::vector<std::pair<int, Kind>>& bad = {}) {
  const std::string path = testing::TempDir() + "/" + name;
  auto db = db::OpenDB(db::Backend::kLmdb, path, db::Mode::kNew);
  auto txn = db->NewTransaction();
  for (int item = 0; item < n; ++item) {
    Kind kind = Kind::kJpeg;
    for (const auto& b : bad)
      if (b.first == item) kind = b.second;
    Datum datum = JpegDatum(item);
    std::string bytes = datum.SerializeAsString();
    if (kind == Kind::kTruncatedDatum) {
      bytes.resize(bytes.size() / 2);  // cut inside the image bytes
    } else if (kind == Kind::kCorruptJpeg) {
      std::string jpeg = datum.data();
      for (size_t i = 0; i < 16 && i < jpeg.size(); ++i) jpeg[i] = 'x';  // no JPEG header left
      datum.set_data(jpeg);
      bytes = datum.SerializeAsString();
    } else if (kind == Kind::kNotADatum) {
      bytes = std::string("\xff\xff\xff\xff", 4);
    }
    txn->Put(Key(item), bytes);
  }
  txn->Commit();
  return path;
}

DataLayer* AsData(Harness* h) { return dynamic_cast<DataLayer*>(h->layer.get()); }

// Set-up of a Data layer with `param` fails with a RuntimeError whose message holds `needle`.
void ExpectSetUpError(const std::string& param, const std::string& needle) {
  Harness h(param);
  try {
    h.SetUp();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::string JpegParam(const std::string& source, int batch, int threads,
                      const std::string& transform, const std::string& data_extra = "") {
  return DataParam(source, batch, "transform_param { " + transform + " }",
                   "decode_threads: " + std::to_string(threads) + " " + data_extra);
}

TEST(DataLayerTest, SameBatchesForAnyNumberOfThreads) {
#ifndef CREMA_WITH_OPENCV
  GTEST_SKIP() << "built without OpenCV";
#endif
  const int kRecords = 11, kBatch = 4, kBatches = 6, kCrop = 15;
  const std::string source = MakeMixedDb("jpeg_threads", kRecords);
  const char* transform = "crop_size: 15 mirror: true scale: 0.5 mean_value: 3";
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 4}) {
    SetRandomSeed(4242);
    Harness h(JpegParam(source, kBatch, threads, transform, "prefetch: 2"));
    h.SetUp();
    EXPECT_EQ(h.data.shape(), (std::vector<int>{kBatch, 3, kCrop, kCrop}));
    std::vector<double> values;
    for (int b = 0; b < kBatches; ++b) {
      h.Forward();
      for (int i = 0; i < kBatch; ++i)
        EXPECT_EQ(h.label.data_at(i), 100 + (b * kBatch + i) % kRecords);
      for (int64_t i = 0; i < h.data.count(); ++i) values.push_back(h.data.data_at(i));
    }
    runs.push_back(values);
  }
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[2], runs[0]);

  // The reference: one transformer seeded as the layer seeds its own, transforming the records
  // one after another (Caffe's single-threaded order of draws).
  SetRandomSeed(4242);
  TransformationParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(transform, &param));
  DataTransformer reference(param, TRAIN);
  reference.InitRand(NextSeed());
  const auto records = ReadLmdb(source);
  std::vector<double> expected;
  for (int n = 0; n < kBatch * kBatches; ++n) {
    Datum datum;
    ASSERT_TRUE(datum.ParseFromString(records[n % kRecords].second));
    std::vector<double> item(3 * kCrop * kCrop);
    reference.Transform(datum, item.data());
    expected.insert(expected.end(), item.begin(), item.end());
  }
  EXPECT_EQ(runs[0], expected);
  // The crops are random (not all the same window): some items of the same record differ.
  bool differ = false;
  const size_t item_size = 3 * kCrop * kCrop;
  for (int n = kRecords; n < kBatch * kBatches && !differ; ++n)
    differ = !std::equal(expected.begin() + n * item_size, expected.begin() + (n + 1) * item_size,
                         expected.begin() + (n - kRecords) * item_size);
  EXPECT_TRUE(differ);
}

TEST(DataLayerTest, DecodedJpegMatchesThePicture) {
#ifndef CREMA_WITH_OPENCV
  GTEST_SKIP() << "built without OpenCV";
#endif
  // TEST phase, no crop: the decoded planes are the encoded picture up to JPEG's loss.
  const std::string source = MakeMixedDb("jpeg_plain", 3);
  Harness h(JpegParam(source, 3, 2, ""), TEST);
  h.SetUp();
  h.Forward();
  EXPECT_EQ(h.data.shape(), (std::vector<int>{3, 3, kJpegH, kJpegW}));
  for (int item = 0; item < 3; ++item) {
    const std::vector<uint8_t> planes = JpegPlanes(item);
    double worst = 0;
    for (size_t i = 0; i < planes.size(); ++i)
      worst = std::max(worst, std::abs(h.data.data_at(item * planes.size() + i) - planes[i]));
    EXPECT_LE(worst, 12) << item;
  }
}

TEST(DataLayerTest, SkipBadRecords) {
#ifndef CREMA_WITH_OPENCV
  GTEST_SKIP() << "built without OpenCV";
#endif
  const std::string source = MakeMixedDb(
      "bad_skip", 9, {{0, Kind::kNotADatum}, {3, Kind::kTruncatedDatum}, {6, Kind::kCorruptJpeg}});
  const std::vector<int> good = {1, 2, 4, 5, 7, 8};
  for (int threads : {1, 3}) {
    Harness h(JpegParam(source, 4, threads, "", "on_bad_record: SKIP"), TEST);
    h.SetUp();  // record 0 is bad: skipped at set-up
    std::vector<int> labels;
    std::vector<int64_t> skipped;
    for (int b = 0; b < 4; ++b) {
      h.Forward();
      for (int i = 0; i < 4; ++i) {
        labels.push_back(static_cast<int>(h.label.data_at(i)) - 100);
        const std::vector<uint8_t> planes = JpegPlanes(labels.back());
        ASSERT_NEAR(h.data.data_at(i * planes.size() + 7), planes[7], 12);
      }
      skipped.push_back(AsData(&h)->skipped_records());
    }
    std::vector<int> expected;
    for (int n = 0; n < 16; ++n) expected.push_back(good[n % good.size()]);
    EXPECT_EQ(labels, expected) << threads;
    // Set-up skips record 0; then each batch of 4 spans 6 records, two of them bad.
    EXPECT_EQ(skipped, (std::vector<int64_t>{2, 4, 6, 8})) << threads;
  }
}

void ExpectStop(const std::string& source, int batch, int forwards, const std::string& key,
                const std::string& what) {
  for (int threads : {1, 4}) {
    Harness h(JpegParam(source, batch, threads, "crop_size: 8", "on_bad_record: STOP"), TEST);
    h.SetUp();
    for (int i = 0; i < forwards; ++i) h.Forward();
    for (int i = 0; i < 2; ++i) {
      try {
        h.Forward();
        FAIL() << "no error";
      } catch (const RuntimeError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("record '" + key + "' of '" + source + "'"), std::string::npos)
            << message;
        EXPECT_NE(message.find(what), std::string::npos) << message;
        EXPECT_NE(message.find("layer \"data\" (Data)"), std::string::npos) << message;
      }
    }
  }
}

TEST(DataLayerTest, StopAtBadRecords) {
#ifndef CREMA_WITH_OPENCV
  GTEST_SKIP() << "built without OpenCV";
#endif
  // The first bad record in cursor order is reported, whatever the threads decode first.
  ExpectStop(
      MakeMixedDb("stop_truncated", 8, {{5, Kind::kTruncatedDatum}, {7, Kind::kCorruptJpeg}}), 3, 1,
      "00000005", "");
  ExpectStop(MakeMixedDb("stop_jpeg", 8, {{4, Kind::kCorruptJpeg}, {5, Kind::kTruncatedDatum}}), 2,
             2, "00000004", "cannot decode");
  // STOP is the default, and a bad first record fails at set-up.
  ExpectSetUpError(DataParam(MakeMixedDb("stop_first", 3, {{0, Kind::kCorruptJpeg}}), 2),
                   "record '00000000'");
}

TEST(DataLayerTest, SkipFailsWhenEveryRecordIsBad) {
  const std::string source = MakeDb(3, /*corrupt_at=*/1);
  {
    // Only record 1 is bad: fine for any number of passes.
    Harness h(DataParam(source, 5, "", "on_bad_record: SKIP decode_threads: 2"));
    h.SetUp();
    for (int b = 0; b < 3; ++b) {
      h.Forward();
      for (int i = 0; i < 5; ++i) EXPECT_EQ(h.label.data_at(i), 10 + ((b * 5 + i) % 2) * 2);
    }
  }
  const std::string all_bad = testing::TempDir() + "/all_bad";
  {
    auto db = db::OpenDB(db::Backend::kLmdb, all_bad, db::Mode::kNew);
    auto txn = db->NewTransaction();
    for (int i = 0; i < 3; ++i) txn->Put(Key(i), "not a datum at all");
    txn->Commit();
  }
  ExpectSetUpError(DataParam(all_bad, 2, "", "on_bad_record: SKIP"), "every record");
}

TEST(DataLayerTest, ShardsCoverEveryRecordOnce) {
  const int kRecords = 10;
  const std::string source = MakeDb(kRecords);
  for (int shards : {1, 3, 4}) {
    std::vector<int> seen(kRecords, 0);
    for (int shard = 0; shard < shards; ++shard) {
      Harness h(DataParam(
          source, 1, "",
          "shard_id: " + std::to_string(shard) + " num_shards: " + std::to_string(shards)));
      h.SetUp();
      // This shard's records, by position: shard, shard + shards, ...
      std::vector<int> mine;
      for (int i = shard; i < kRecords; i += shards) mine.push_back(i);
      for (size_t n = 0; n < 2 * mine.size() + 1; ++n) {
        h.Forward();
        const int record = static_cast<int>(h.label.data_at(0)) - 10;
        ASSERT_EQ(record, mine[n % mine.size()]) << shards << " " << shard << " " << n;
        ASSERT_EQ(h.data.data_at(h.data.offset(0, 1, 2, 3)), Pixel(record, 1, 2, 3));
        if (n < mine.size()) ++seen[record];
      }
    }
    EXPECT_EQ(seen, std::vector<int>(kRecords, 1)) << shards;
  }
  {
    Harness h(DataParam(source, 1, "", "shard_id: 3 num_shards: 3"));
    EXPECT_THROW(h.SetUp(), ConfigError);
  }
  {
    Harness h(DataParam(source, 1, "", "num_shards: 0"));
    EXPECT_THROW(h.SetUp(), ConfigError);
  }
  ExpectSetUpError(DataParam(MakeDb(2), 1, "", "shard_id: 2 num_shards: 3"), "none of them");
}

TEST(DataLayerTest, RandSkipWithinAShard) {
  const std::string source = MakeDb(9);
  for (int seed = 0; seed < 10; ++seed) {
    SetRandomSeed(seed);
    const uint32_t skip = static_cast<uint32_t>(ThreadRng()()) % 4;
    SetRandomSeed(seed);
    Harness h(DataParam(source, 2, "", "rand_skip: 4 shard_id: 1 num_shards: 2"));
    h.SetUp();
    h.Forward();
    // Shard 1 holds records 1, 3, 5, 7; the skip counts records of the shard.
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(h.label.data_at(i), 10 + 1 + 2 * ((skip + i) % 4)) << seed;
  }
}

}  // namespace
}  // namespace crema
