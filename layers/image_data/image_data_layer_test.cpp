#include "layers/image_data/image_data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema::testing {
namespace {

// A minimal PNG writer (8-bit gray or RGB, zlib "stored" blocks), independent of OpenCV, which
// the tests are not linked against.
uint32_t Crc(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}
void Put32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}
void Chunk(std::string* png, const char* type, const std::string& data) {
  Put32(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  *png += body;
  Put32(png, Crc(body));
}
// `pixels`: height x width x channels (RGB order for 3 channels).
void WritePng(const std::string& path, int height, int width, int channels,
              const std::vector<uint8_t>& pixels) {
  std::string raw;
  for (int h = 0; h < height; ++h) {
    raw.push_back('\0');  // filter: none
    raw.append(reinterpret_cast<const char*>(pixels.data()) + h * width * channels,
               width * channels);
  }
  std::string z = "\x78\x01";
  for (size_t pos = 0; pos < raw.size() || pos == 0; pos += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - pos);
    z.push_back(pos + n >= raw.size() ? 1 : 0);
    z.push_back(static_cast<char>(n & 0xff));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff));
    z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z += raw.substr(pos, n);
    if (pos + n >= raw.size()) break;
  }
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
  Put32(&z, (b << 16) | a);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  Put32(&ihdr, width);
  Put32(&ihdr, height);
  ihdr += std::string{8, static_cast<char>(channels == 3 ? 2 : 0), 0, 0, 0};
  Chunk(&png, "IHDR", ihdr);
  Chunk(&png, "IDAT", z);
  Chunk(&png, "IEND", "");
  std::ofstream(path, std::ios::binary) << png;
}

// Image i: 3 x 4 RGB, pixel (h, w) = (10 * i + h, 100 + w, 200 + i).
std::vector<uint8_t> Pixels(int i, int height = 3, int width = 4) {
  std::vector<uint8_t> p;
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w)
      p.insert(p.end(), {static_cast<uint8_t>(10 * i + h), static_cast<uint8_t>(100 + w),
                         static_cast<uint8_t>(200 + i)});
  return p;
}

struct Fixture {
  std::string dir = TempDir();
  std::string list = dir + "/list.txt";
  explicit Fixture(int n) {
    std::ofstream out(list);
    for (int i = 0; i < n; ++i) {
      WritePng(dir + "/img" + std::to_string(i) + ".png", 3, 4, 3, Pixels(i));
      out << "img" << i << ".png " << 5 + i << "\n";
    }
  }
  std::unique_ptr<Layer> Make(const std::string& extra) const {
    return CreateLayer("type: 'ImageData' image_data_param { source: '" + list +
                       "' root_folder: '" + dir + "/' " + extra + " }");
  }
};

// Caffe's layout: BGR planes.
double Expected(int i, int c, int h, int w) {
  return c == 0 ? 200 + i : c == 1 ? 100 + w : 10 * i + h;
}

TEST(ImageDataLayer, ReadsImagesAndLabelsInOrder) {
  Fixture f(3);
  auto layer = f.Make("batch_size: 2");
  EXPECT_STREQ(layer->type(), "ImageData");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 3, 3, 4}));
  EXPECT_EQ(label.shape(), (std::vector<int>{2}));
  const int order[] = {0, 1, 2, 0, 1, 2};
  for (int pass = 0; pass < 3; ++pass) {
    layer->Forward({}, {&data, &label});
    const std::vector<double> values = DataOf(data);
    for (int item = 0; item < 2; ++item) {
      const int i = order[pass * 2 + item];
      EXPECT_EQ(DataOf(label)[item], 5 + i);
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 3; ++h)
          for (int w = 0; w < 4; ++w)
            ASSERT_EQ(values[((item * 3 + c) * 3 + h) * 4 + w], Expected(i, c, h, w))
                << "pass " << pass << " item " << item;
    }
  }
}

TEST(ImageDataLayer, ResizeGrayAndTransform) {
  Fixture f(2);
  {
    std::ofstream out(f.list);
    WritePng(f.dir + "/flat.png", 5, 7, 3, std::vector<uint8_t>(5 * 7 * 3, 60));
    out << "flat.png 3\n";
  }
  auto layer = f.Make("batch_size: 1 new_height: 8 new_width: 6");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{1, 3, 8, 6}));
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(data), std::vector<double>(3 * 8 * 6, 60.0));
  EXPECT_EQ(DataOf(label), std::vector<double>{3});

  auto gray = CreateLayer(
      "type: 'ImageData' transform_param { scale: 0.5 mean_value: 20 } "
      "image_data_param { source: '" +
      f.list + "' root_folder: '" + f.dir + "/' is_color: false new_height: 2 new_width: 3 }");
  gray->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{1, 1, 2, 3}));
  gray->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(data), std::vector<double>(6, 20.0));  // (60 - 20) * 0.5
}

TEST(ImageDataLayer, ShuffleAndSkipKeepEveryImage) {
  Fixture f(5);
  SetRandomSeed(11);
  auto layer = f.Make("batch_size: 5 shuffle: true rand_skip: 3");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  for (int pass = 0; pass < 2; ++pass) {
    layer->Forward({}, {&data, &label});
    const std::vector<double> labels = DataOf(label), values = DataOf(data);
    for (int item = 0; item < 5; ++item) {
      const int i = static_cast<int>(labels[item]) - 5;
      ASSERT_GE(i, 0);
      ASSERT_LT(i, 5);
      EXPECT_EQ(values[item * 36], Expected(i, 0, 0, 0));  // image matches its label
    }
  }
}

void ExpectRuntimeError(Layer* layer, const std::string& needle) {
  Blob data, label;
  try {
    layer->SetUp({}, {&data, &label});
    layer->Forward({}, {&data, &label});
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ImageDataLayer, ShardsReadEveryNthLine) {
  // Shard r of N reads the lines r, r + N, ... (in order; a shuffle permutes only those).
  Fixture f(7);
  for (int shards : {1, 2, 3}) {
    std::vector<int> seen(7, 0);
    for (int shard = 0; shard < shards; ++shard) {
      std::vector<double> mine;
      for (int i = shard; i < 7; i += shards) mine.push_back(5 + i);
      const std::string sharding =
          " shard_id: " + std::to_string(shard) + " num_shards: " + std::to_string(shards);
      auto layer = f.Make("batch_size: 1" + sharding);
      Blob data, label;
      layer->SetUp({}, {&data, &label});
      EXPECT_EQ(layer->NumRecords(), static_cast<int64_t>(mine.size()));
      for (size_t n = 0; n < 2 * mine.size(); ++n) {  // two passes
        layer->Forward({}, {&data, &label});
        ASSERT_EQ(DataOf(label)[0], mine[n % mine.size()]) << shards << " " << shard << " " << n;
        const int i = static_cast<int>(mine[n % mine.size()]) - 5;
        EXPECT_EQ(DataOf(data)[0], Expected(i, 0, 0, 0));
        if (n < mine.size()) ++seen[i];
      }
      SetRandomSeed(3);
      auto shuffled =
          f.Make("batch_size: " + std::to_string(mine.size()) + " shuffle: true" + sharding);
      shuffled->SetUp({}, {&data, &label});
      shuffled->Forward({}, {&data, &label});
      std::vector<double> labels = DataOf(label);
      std::sort(labels.begin(), labels.end());
      EXPECT_EQ(labels, mine) << shards << " " << shard;
    }
    EXPECT_EQ(seen, std::vector<int>(7, 1)) << shards;  // the shards partition the list
  }
  Blob data, label;
  EXPECT_THROW(f.Make("shard_id: 2 num_shards: 2")->SetUp({}, {&data, &label}), ConfigError);
  EXPECT_THROW(f.Make("num_shards: 0")->SetUp({}, {&data, &label}), ConfigError);
  Fixture two(2);
  ExpectRuntimeError(two.Make("shard_id: 2 num_shards: 3").get(), "none of them in shard_id 2");
}

TEST(ImageDataLayer, RealImages) {
  CREMA_REQUIRE_REFERENCE(dir, "real/images/chelsea.png");
  const std::string root = dir.substr(0, dir.size() - std::string("chelsea.png").size());
  const std::string list = TempDir() + "/real.txt";
  std::ofstream(list) << "chelsea.png 281\ncoffee.png 504\n";
  auto full = CreateLayer("type: 'ImageData' image_data_param { source: '" + list +
                          "' root_folder: '" + root + "' }");
  Blob data, label;
  full->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{1, 3, 300, 451}));
  full->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), std::vector<double>{281});
  double full_mean = 0, lo = 255, hi = 0;
  for (double v : DataOf(data)) full_mean += v, lo = std::min(lo, v), hi = std::max(hi, v);
  full_mean /= data.count();
  EXPECT_GE(lo, 0);
  EXPECT_LE(hi, 255);
  EXPECT_GT(hi - lo, 100);  // a real picture, not a blank
  auto resized = CreateLayer("type: 'ImageData' image_data_param { source: '" + list +
                             "' root_folder: '" + root +
                             "' batch_size: 2 new_height: 100 "
                             "new_width: 150 }");
  resized->SetUp({}, {&data, &label});
  resized->Forward({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 3, 100, 150}));
  EXPECT_EQ(DataOf(label), (std::vector<double>{281, 504}));
  double small_mean = 0;
  const std::vector<double> values = DataOf(data);
  for (int k = 0; k < 3 * 100 * 150; ++k) small_mean += values[k];
  small_mean /= 3 * 100 * 150;
  EXPECT_NEAR(small_mean, full_mean, 2.0);
}

TEST(ImageDataLayer, Errors) {
  Fixture f(1);
  std::ofstream(f.list) << "img0.png 1\nmissing.png 2\n";
  ExpectRuntimeError(f.Make("batch_size: 2").get(), "missing.png");
  std::ofstream(f.dir + "/corrupt.png") << "not a png at all";
  std::ofstream(f.list) << "corrupt.png 1\n";
  ExpectRuntimeError(f.Make("").get(), "corrupt.png");
  std::ofstream(f.list) << "img0.png\n";
  ExpectRuntimeError(f.Make("").get(), "list.txt");
  // A label that is not a whole int32 names the list file and line (it once read as 0).
  for (const char* label : {"cat", "3x", "2147483648", "-2147483649", "1.5", ""}) {
    std::ofstream(f.list) << "img0.png 1\n\nimg0.png " << label << "\n";
    ExpectRuntimeError(f.Make("").get(), f.list + ":3: expected \"path label\"");
  }
  std::ofstream(f.list) << " 4\n";  // no path
  ExpectRuntimeError(f.Make("").get(), f.list + ":1: expected \"path label\"");
  std::ofstream(f.list) << "img0.png -2147483648\n";
  {
    auto layer = f.Make("");
    Blob data, label;
    layer->SetUp({}, {&data, &label});
    layer->Forward({}, {&data, &label});
    EXPECT_EQ(label.data_at(0), -2147483648.0);
  }
  ExpectRuntimeError(
      CreateLayer("type: 'ImageData' image_data_param { source: '/nonexistent/l.txt' }").get(),
      "/nonexistent/l.txt");
  std::ofstream(f.list) << "img0.png 1\n";
  Blob data, label;
  EXPECT_THROW(f.Make("new_height: 4")->SetUp({}, {&data, &label}), ConfigError);
  EXPECT_THROW(f.Make("batch_size: 0")->SetUp({}, {&data, &label}), ConfigError);
  Blob only;
  EXPECT_THROW(f.Make("")->SetUp({}, {&only}), ConfigError);
}

TEST(ImageDataLayer, SkipMissingAndCorruptImages) {
  Fixture f(3);
  std::ofstream(f.dir + "/corrupt.png") << "not a png at all";
  std::ofstream(f.list) << "missing.png 9\nimg0.png 5\ncorrupt.png 9\nimg1.png 6\nimg2.png 7\n";
  for (int threads : {1, 3}) {
    auto layer =
        f.Make("batch_size: 3 on_bad_record: SKIP decode_threads: " + std::to_string(threads));
    Blob data, label;
    layer->SetUp({}, {&data, &label});  // skips missing.png
    std::vector<double> labels;
    for (int b = 0; b < 3; ++b) {
      layer->Forward({}, {&data, &label});
      const std::vector<double> values = DataOf(data);
      for (int item = 0; item < 3; ++item) {
        labels.push_back(DataOf(label)[item]);
        EXPECT_EQ(values[item * 36], Expected(static_cast<int>(labels.back()) - 5, 0, 0, 0));
      }
    }
    EXPECT_EQ(labels, (std::vector<double>{5, 6, 7, 5, 6, 7, 5, 6, 7})) << threads;
    // set-up: missing; batch 1: corrupt; batch 2: missing, corrupt; batch 3: missing, corrupt.
    EXPECT_EQ(dynamic_cast<ImageDataLayer*>(layer.get())->skipped_images(), 6) << threads;
  }
  // Nothing readable: an error naming the list, not an endless loop.
  std::ofstream(f.list) << "missing.png 1\ncorrupt.png 2\n";
  ExpectRuntimeError(f.Make("on_bad_record: SKIP").get(), "no image of");
  // STOP (the default) names the path.
  std::ofstream(f.list) << "img0.png 1\ncorrupt.png 2\n";
  ExpectRuntimeError(f.Make("batch_size: 2 on_bad_record: STOP").get(), "corrupt.png");
}

TEST(ImageDataLayer, SameBatchesForAnyNumberOfThreads) {
  Fixture f(7);
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 4}) {
    SetRandomSeed(99);
    auto layer = CreateLayer(
        "type: 'ImageData' transform_param { crop_size: 2 mirror: true } image_data_param { "
        "source: '" +
        f.list + "' root_folder: '" + f.dir +
        "/' batch_size: 3 shuffle: true decode_threads: " + std::to_string(threads) + " }");
    Blob data, label;
    layer->SetUp({}, {&data, &label});
    std::vector<double> values;
    for (int b = 0; b < 6; ++b) {
      layer->Forward({}, {&data, &label});
      for (double v : DataOf(data)) values.push_back(v);
      for (double v : DataOf(label)) values.push_back(v);
    }
    runs.push_back(values);
  }
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[2], runs[0]);
}

}  // namespace
}  // namespace crema::testing
