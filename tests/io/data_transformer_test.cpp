#include "io/data_transformer.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

constexpr int kC = 3, kH = 6, kW = 7;

// Pixel value of (c, h, w) in the synthetic image.
int Pixel(int c, int h, int w) { return (c * 50 + h * 9 + w * 2 + 1) % 256; }

Datum MakeDatum(bool as_float = false) {
  Datum datum;
  datum.set_channels(kC);
  datum.set_height(kH);
  datum.set_width(kW);
  std::string bytes;
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) {
        if (as_float)
          datum.add_float_data(Pixel(c, h, w) + 0.25f);
        else
          bytes.push_back(static_cast<char>(Pixel(c, h, w)));
      }
  if (!as_float) datum.set_data(bytes);
  datum.set_label(4);
  return datum;
}

TransformationParameter Param(const std::string& text) {
  TransformationParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return param;
}

template <typename T>
std::vector<T> TransformAll(DataTransformer* t, const Datum& datum) {
  const std::vector<int> shape = t->InferBlobShape(datum);
  std::vector<T> out(static_cast<size_t>(shape[1]) * shape[2] * shape[3], T(-999));
  t->Transform(datum, out.data());
  return out;
}

// OpenCV's interleaved rows (with padding at each row's end) -> Caffe's C x H x W Datum planes,
// the one copy convert-imageset and compute-image-mean share.
TEST(DataTransformerTest, InterleavedToDatum) {
  const int channels = 3, rows = 2, cols = 3;
  const size_t row_bytes = 11;  // 9 pixel values and 2 bytes of padding
  std::vector<uint8_t> pixels(row_bytes * rows, 0xEE);
  for (int h = 0; h < rows; ++h)
    for (int w = 0; w < cols; ++w)
      for (int c = 0; c < channels; ++c)
        pixels[h * row_bytes + w * channels + c] = 100 * c + 10 * h + w;
  Datum datum;
  datum.set_label(7);
  datum.add_float_data(1.5f);
  datum.set_encoded(true);
  InterleavedToDatum(pixels.data(), row_bytes, channels, rows, cols, &datum);
  EXPECT_EQ(datum.channels(), 3);
  EXPECT_EQ(datum.height(), 2);
  EXPECT_EQ(datum.width(), 3);
  EXPECT_FALSE(datum.encoded());
  EXPECT_EQ(datum.float_data_size(), 0);
  EXPECT_EQ(datum.label(), 7);
  ASSERT_EQ(datum.data().size(), 18u);
  for (int c = 0; c < channels; ++c)
    for (int h = 0; h < rows; ++h)
      for (int w = 0; w < cols; ++w)
        EXPECT_EQ(static_cast<uint8_t>(datum.data()[(c * rows + h) * cols + w]),
                  100 * c + 10 * h + w)
            << c << " " << h << " " << w;
  // One channel.
  const uint8_t gray[] = {1, 2, 3, 4};
  InterleavedToDatum(gray, 2, 1, 2, 2, &datum);
  EXPECT_EQ(datum.data(), std::string("\x01\x02\x03\x04"));
  EXPECT_EQ(datum.channels(), 1);
}

TEST(DataTransformerTest, ScaleFloatAndDouble) {
  DataTransformer t(Param("scale: 0.00390625"), TEST);
  const Datum datum = MakeDatum();
  EXPECT_EQ(t.InferBlobShape(datum), (std::vector<int>{1, kC, kH, kW}));
  EXPECT_FALSE(t.NeedsRandom());
  const auto f = TransformAll<float>(&t, datum);
  const auto d = TransformAll<double>(&t, datum);
  for (int c = 0, i = 0; c < kC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w, ++i) {
        EXPECT_EQ(f[i], static_cast<float>(Pixel(c, h, w)) * 0.00390625f);
        EXPECT_EQ(d[i], static_cast<double>(Pixel(c, h, w)) * static_cast<double>(0.00390625f));
      }
}

TEST(DataTransformerTest, FloatDataAndMeanValues) {
  DataTransformer one(Param("mean_value: 10 scale: 2"), TEST);
  DataTransformer per_channel(Param("mean_value: 10 mean_value: 20 mean_value: 30"), TEST);
  const Datum datum = MakeDatum(/*as_float=*/true);
  const auto a = TransformAll<float>(&one, datum);
  const auto b = TransformAll<float>(&per_channel, datum);
  for (int c = 0, i = 0; c < kC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w, ++i) {
        const float pixel = Pixel(c, h, w) + 0.25f;
        EXPECT_EQ(a[i], (pixel - 10.0f) * 2.0f);
        EXPECT_EQ(b[i], pixel - 10.0f * (c + 1));
      }
}

TEST(DataTransformerTest, CenterCropWithMeanFileInTest) {
  // The mean is indexed at the uncropped position, as Caffe.
  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(kC);
  mean.set_height(kH);
  mean.set_width(kW);
  for (int i = 0; i < kC * kH * kW; ++i) mean.add_data(0.5f * i);
  const std::string path = testing::TempDir() + "/mean.binaryproto";
  std::ofstream(path, std::ios::binary) << mean.SerializeAsString();
  DataTransformer t(Param("crop_size: 4 scale: 0.5 mean_file: '" + path + "'"), TEST);
  const Datum datum = MakeDatum();
  EXPECT_EQ(t.InferBlobShape(datum), (std::vector<int>{1, kC, 4, 4}));
  const auto out = TransformAll<float>(&t, datum);
  const int h_off = (kH - 4) / 2, w_off = (kW - 4) / 2;  // 1, 1
  for (int c = 0, i = 0; c < kC; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w, ++i) {
        const int src = (c * kH + h + h_off) * kW + w + w_off;
        EXPECT_EQ(out[i], (Pixel(c, h + h_off, w + w_off) - 0.5f * src) * 0.5f);
      }
}

// TRAIN: the draws are Caffe's: mirror = r() % 2, then h_off = r() % (H - crop + 1), then w_off.
TEST(DataTransformerTest, RandomCropAndMirrorFollowCaffesDraws) {
  DataTransformer t(Param("crop_size: 3 mirror: true"), TRAIN);
  ASSERT_TRUE(t.NeedsRandom());
  t.InitRand(1701);
  std::mt19937 expected_rng(1701);
  const Datum datum = MakeDatum();
  int mirrored = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool mirror = expected_rng() % 2 != 0;
    const int h_off = static_cast<int>(expected_rng() % (kH - 3 + 1));
    const int w_off = static_cast<int>(expected_rng() % (kW - 3 + 1));
    mirrored += mirror;
    const auto out = TransformAll<float>(&t, datum);
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 3; ++w) {
          const int top = (c * 3 + h) * 3 + (mirror ? 2 - w : w);
          ASSERT_EQ(out[top], Pixel(c, h + h_off, w + w_off)) << "trial " << trial;
        }
  }
  EXPECT_GT(mirrored, 5);
  EXPECT_LT(mirrored, 35);
}

TEST(DataTransformerTest, MirrorIsRandomInTestToo) {
  // Caffe draws the mirror in both phases; only the crop is centred in TEST.
  DataTransformer t(Param("mirror: true"), TEST);
  ASSERT_TRUE(t.NeedsRandom());
  t.InitRand(7);
  std::mt19937 expected_rng(7);
  const Datum datum = MakeDatum();
  for (int trial = 0; trial < 10; ++trial) {
    const bool mirror = expected_rng() % 2 != 0;
    const auto out = TransformAll<float>(&t, datum);
    EXPECT_EQ(out[0], Pixel(0, 0, mirror ? kW - 1 : 0));
  }
  DataTransformer crop_only(Param("crop_size: 2"), TEST);
  EXPECT_FALSE(crop_only.NeedsRandom());
}

TEST(DataTransformerTest, BlobSlice) {
  DataTransformer t(Param("scale: 2"), TEST);
  const Datum datum = MakeDatum();
  Blob blob(std::vector<int>{2, kC, kH, kW}, DataType::kFloat64);
  blob.SetDataZero();
  t.Transform(datum, &blob, 1, "record 'k'");
  EXPECT_EQ(blob.data_at(0), 0.0);
  EXPECT_EQ(blob.data_at(blob.offset(1)), 2.0 * Pixel(0, 0, 0));
  EXPECT_EQ(blob.data_at(blob.count() - 1), 2.0 * Pixel(kC - 1, kH - 1, kW - 1));
  Blob wrong(std::vector<int>{2, kC, kH, kW + 1});
  try {
    t.Transform(datum, &wrong, 0, "record 'k'");
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("record 'k'"), std::string::npos) << e.what();
  }
}

TEST(DataTransformerTest, ParameterErrors) {
  EXPECT_THROW(DataTransformer(Param("mean_file: 'm' mean_value: 1"), TEST), ConfigError);
  EXPECT_THROW(DataTransformer(Param("force_color: true force_gray: true"), TEST), ConfigError);
  EXPECT_THROW(DataTransformer(Param("mean_file: '/nonexistent/mean.binaryproto'"), TEST),
               RuntimeError);
  const Datum datum = MakeDatum();
  DataTransformer big_crop(Param("crop_size: 7"), TEST);  // H is 6
  EXPECT_THROW(big_crop.InferBlobShape(datum), ConfigError);
  DataTransformer two_means(Param("mean_value: 1 mean_value: 2"), TEST);  // 3 channels
  EXPECT_THROW(two_means.InferBlobShape(datum), ConfigError);

  BlobProto mean;
  mean.mutable_shape()->add_dim(1);
  mean.mutable_shape()->add_dim(1);
  mean.mutable_shape()->add_dim(kH);
  mean.mutable_shape()->add_dim(kW);
  for (int i = 0; i < kH * kW; ++i) mean.add_data(1);
  const std::string path = testing::TempDir() + "/mean.binaryproto";
  std::ofstream(path, std::ios::binary) << mean.SerializeAsString();
  DataTransformer wrong_mean(Param("mean_file: '" + path + "'"), TEST);
  try {
    wrong_mean.InferBlobShape(datum);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("1 x 6 x 7"), std::string::npos) << e.what();
  }
}

TEST(DataTransformerTest, CorruptRecords) {
  DataTransformer t(Param(""), TEST);
  Datum truncated = MakeDatum();
  truncated.mutable_data()->resize(10);
  try {
    TransformAll<float>(&t, truncated);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("record"), std::string::npos) << e.what();
  }
  try {
    t.InferBlobShape(Datum(), "record '00000042' of 'db'");
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("00000042"), std::string::npos) << e.what();
  }
  Datum parsed;
  try {
    ParseDatum("\xff\xff\xff", &parsed, "record 'x7'");
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("x7"), std::string::npos) << e.what();
  }
  Datum encoded;
  encoded.set_encoded(true);
  encoded.set_data("not an image");
#ifdef CREMA_WITH_OPENCV
  EXPECT_THROW(t.InferBlobShape(encoded, "record 'e'"), RuntimeError);
#else
  try {
    t.InferBlobShape(encoded, "record 'e'");
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("without OpenCV"), std::string::npos) << e.what();
  }
#endif
}

// One picture as C x H x W planes (*a, a Datum's layout) and H x W x C (*b, OpenCV's).
void TwoLayouts(int channels, int height, int width, const std::vector<uint8_t>& planes,
                const std::vector<uint8_t>& interleaved, DataTransformer::Image* a,
                DataTransformer::Image* b) {
  a->channels = b->channels = channels;
  a->height = b->height = height;
  a->width = b->width = width;
  a->bytes = planes.data();
  b->bytes = interleaved.data();
  b->interleaved = true;
}

TEST(DataTransformerTest, InterleavedAndPlanarImagesAgree) {
  // The same picture as C x H x W planes and as OpenCV's H x W x C, through a mean file, a
  // random crop and a mirror: the same output, and each value checked against the planes.
  std::vector<uint8_t> planes, interleaved(kC * kH * kW);
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) {
        planes.push_back(static_cast<uint8_t>(Pixel(c, h, w)));
        interleaved[(h * kW + w) * kC + c] = static_cast<uint8_t>(Pixel(c, h, w));
      }
  BlobProto mean;
  for (int d : {1, kC, kH, kW}) mean.mutable_shape()->add_dim(d);
  for (int i = 0; i < kC * kH * kW; ++i) mean.add_data(i * 0.5f);
  const std::string path = testing::TempDir() + "/mean_interleaved.binaryproto";
  std::ofstream(path, std::ios::binary) << mean.SerializeAsString();
  DataTransformer t(Param("crop_size: 4 mirror: true scale: 2 mean_file: '" + path + "'"), TRAIN);
  DataTransformer::Image a, b;
  TwoLayouts(kC, kH, kW, planes, interleaved, &a, &b);
  EXPECT_EQ(t.ShapeOf(b), (std::vector<int>{1, kC, 4, 4}));
  std::set<int> offsets;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    DataTransformer::Draws draws;
    for (uint32_t k = 0; k < 3; ++k) draws.words[k] = seed * 2654435761u + 12345u * k * (seed + 1);
    std::vector<double> from_a(kC * 16), from_b(kC * 16);
    t.Transform(a, draws, from_a.data());
    t.Transform(b, draws, from_b.data());
    ASSERT_EQ(from_a, from_b) << seed;
    // Caffe's choices from the words: mirror = w0 % 2, h_off = w1 % 3, w_off = w2 % 4.
    const bool mirror = draws.words[0] % 2 != 0;
    const int h_off = draws.words[1] % (kH - 4 + 1), w_off = draws.words[2] % (kW - 4 + 1);
    offsets.insert(h_off * 10 + w_off + (mirror ? 100 : 0));
    for (int c = 0; c < kC; ++c)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
          const int index = (c * kH + y + h_off) * kW + x + w_off;
          const double expected = (Pixel(c, y + h_off, x + w_off) - index * 0.5) * 2;
          ASSERT_EQ(from_a[(c * 4 + y) * 4 + (mirror ? 3 - x : x)], expected) << seed;
        }
  }
  EXPECT_GT(offsets.size(), 6u);
}

// Decoded (interleaved) 1- and 3-channel images with mean_value or no mean, crop and mirror, rows
// short and long: bit for bit what the planar path gives, and Caffe's formula computed in T.
template <typename T>
void CheckInterleavedWithMeanValues(int channels, const std::string& transform, int height,
                                    int width, int crop, uint32_t seeds) {
  const std::string params = transform + " crop_size: " + std::to_string(crop);
  SCOPED_TRACE(params + ", " + std::to_string(channels) + " channels, " + std::to_string(height) +
               " x " + std::to_string(width));
  std::vector<uint8_t> planes, interleaved(static_cast<size_t>(channels) * height * width);
  for (int c = 0; c < channels; ++c)
    for (int h = 0; h < height; ++h)
      for (int w = 0; w < width; ++w) {
        // Not periodic in w (pixels a multiple of 256 apart must differ).
        const auto value =
            static_cast<uint8_t>((((c * 1009u + h) * 7919u + w) * 2654435761u) >> 24);
        planes.push_back(value);
        interleaved[(static_cast<size_t>(h) * width + w) * channels + c] = value;
      }
  const TransformationParameter param = Param(params);
  DataTransformer t(param, TRAIN);
  DataTransformer::Image a, b;
  TwoLayouts(channels, height, width, planes, interleaved, &a, &b);
  for (uint32_t seed = 0; seed < seeds; ++seed) {
    DataTransformer::Draws draws;
    for (uint32_t k = 0; k < 3; ++k) draws.words[k] = seed * 2246822519u + 3266489917u * k;
    const size_t count = static_cast<size_t>(channels) * crop * crop;
    std::vector<T> from_a(count, T(-1)), from_b(count, T(-2));
    t.Transform(a, draws, from_a.data());
    t.Transform(b, draws, from_b.data());
    ASSERT_EQ(from_a, from_b) << seed;
    const bool mirror = param.mirror() && draws.words[0] % 2 != 0;
    const int first = param.mirror() ? 1 : 0;
    const int h_off = draws.words[first] % (height - crop + 1);
    const int w_off = draws.words[first + 1] % (width - crop + 1);
    for (int c = 0; c < channels; ++c) {
      const T mean = param.mean_value_size() == 0   ? T(0)
                     : param.mean_value_size() == 1 ? static_cast<T>(param.mean_value(0))
                                                    : static_cast<T>(param.mean_value(c));
      for (int y = 0; y < crop; ++y)
        for (int x = 0; x < crop; ++x) {
          const T pixel = planes[(static_cast<size_t>(c) * height + y + h_off) * width + x + w_off];
          const T expected = param.mean_value_size() == 0
                                 ? pixel * static_cast<T>(param.scale())
                                 : (pixel - mean) * static_cast<T>(param.scale());
          ASSERT_EQ(from_b[(c * crop + y) * crop + (mirror ? crop - 1 - x : x)], expected)
              << seed << " c " << c << " y " << y << " x " << x;
        }
    }
  }
}

TEST(DataTransformerTest, InterleavedWithMeanValuesMatchesThePlanarPath) {
  for (const char* params :
       {"mirror: true mean_value: 104 mean_value: 117 mean_value: 123",
        "mirror: true mean_value: 127.3 scale: 0.0078125", "scale: 0.017", "mirror: true"}) {
    const int channel_counts[] = {3, 1};
    for (int channels : channel_counts) {
      if (channels == 1 && std::string(params).find("mean_value: 117") != std::string::npos)
        continue;  // three values for one channel: a ConfigError elsewhere
      CheckInterleavedWithMeanValues<float>(channels, params, 9, 11, 5, 24);
      CheckInterleavedWithMeanValues<double>(channels, params, 9, 11, 5, 24);
      // Rows longer than the vector widths and caches a faster path might use.
      CheckInterleavedWithMeanValues<float>(channels, params, 540, 600, 530, 3);
    }
  }
}

}  // namespace
}  // namespace crema
