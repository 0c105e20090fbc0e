#include "layers/window_data/window_data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema::testing {
namespace {

// A minimal PNG writer (8-bit RGB, zlib "stored" blocks): the tests are not linked to OpenCV.
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
// `rgb`: height x width x 3.
void WritePng(const std::string& path, int height, int width, const std::vector<uint8_t>& rgb) {
  std::string raw;
  for (int h = 0; h < height; ++h) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(rgb.data()) + h * width * 3, width * 3);
  }
  std::string z = "\x78\x01";
  z.push_back(1);  // one final stored block (the images are small)
  const size_t n = raw.size();
  z += {static_cast<char>(n & 0xff), static_cast<char>(n >> 8), static_cast<char>(~n & 0xff),
        static_cast<char>((~n >> 8) & 0xff)};
  z += raw;
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
  Put32(&z, (b << 16) | a);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  Put32(&ihdr, width);
  Put32(&ihdr, height);
  ihdr += std::string{8, 2, 0, 0, 0};
  Chunk(&png, "IHDR", ihdr);
  Chunk(&png, "IDAT", z);
  Chunk(&png, "IEND", "");
  std::ofstream(path, std::ios::binary) << png;
}

// Image `i` is 10 x 12 (H x W); its pixel (h, w) in Caffe's BGR channel order.
constexpr int kHeight = 10, kWidth = 12;
int Pixel(int i, int c, int h, int w) {
  return c == 0 ? 20 * i + 3 * h + 2 * w : c == 1 ? 100 + 5 * h : 250 - 9 * w - i;
}

struct Fixture {
  std::string dir = TempDir();
  std::string windows = dir + "/windows.txt";
  Fixture() {
    for (int i = 0; i < 2; ++i) {
      std::vector<uint8_t> rgb;
      for (int h = 0; h < kHeight; ++h)
        for (int w = 0; w < kWidth; ++w)
          for (int c : {2, 1, 0}) rgb.push_back(static_cast<uint8_t>(Pixel(i, c, h, w)));
      WritePng(dir + "/img" + std::to_string(i) + ".png", kHeight, kWidth, rgb);
    }
    // Foreground (overlap >= 0.6): labels 1 and 2, 4 x 4 boxes. Background (< 0.5): two boxes
    // whose labels are forced to 0. The 0.55 box is neither and is dropped.
    WriteWindows(
        "# 0\nimg0.png\n3\n10\n12\n3\n1 0.9 0 0 3 3\n5 0.3 2 1 5 4\n7 0.55 0 0 5 5\n"
        "# 1\nimg1.png\n3 10 12\n2\n2 0.7 6 4 9 7\n0 0.1 8 6 11 9\n");
  }
  void WriteWindows(const std::string& text) const { std::ofstream(windows) << text; }
  std::unique_ptr<Layer> Make(const std::string& window_extra, const std::string& transform,
                              DataType dtype = DataType::kFloat64) const {
    return CreateLayer("type: 'WindowData' window_data_param { source: '" + windows +
                           "' root_folder: '" + dir + "/' fg_threshold: 0.6 bg_threshold: 0.5 " +
                           window_extra + " } transform_param { " + transform + " }",
                       dtype);
  }
};

// The windows of the fixture, by label (the background ones by their image's top-left corner).
struct Box {
  int image, x1, y1;
};

// The 4 x 4 box at (x1, y1) of image `image`, copied unscaled (crop_size 4): exact pixels.
bool MatchesBox(const std::vector<double>& values, int item, const Box& box, double mean,
                double scale, bool mirrored) {
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) {
        const int src_w = mirrored ? 3 - w : w;
        const double expected = (Pixel(box.image, c, box.y1 + h, box.x1 + src_w) - mean) * scale;
        if (std::abs(values[((item * 3 + c) * 4 + h) * 4 + w] - expected) > 1e-9) return false;
      }
  return true;
}

TEST(WindowDataLayer, SplitsForegroundAndBackgroundWithExactCrops) {
  Fixture f;
  SetRandomSeed(1701);
  auto layer =
      f.Make("batch_size: 8 fg_fraction: 0.5 scale: 0.5", "crop_size: 4 mean_value: 10 scale: 2");
  EXPECT_STREQ(layer->type(), "WindowData");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{8, 3, 4, 4}));
  EXPECT_EQ(label.shape(), (std::vector<int>{8}));
  std::set<int> fg_labels;
  for (int pass = 0; pass < 4; ++pass) {
    layer->Forward({}, {&data, &label});
    const std::vector<double> values = DataOf(data);
    const std::vector<double> labels = DataOf(label);
    for (int item = 0; item < 8; ++item) {
      if (item < 4) {  // background first: label 0, one of the two background boxes
        EXPECT_EQ(labels[item], 0) << item;
        EXPECT_TRUE(MatchesBox(values, item, {0, 2, 1}, 10, 1, false) ||
                    MatchesBox(values, item, {1, 8, 6}, 10, 1, false))
            << "pass " << pass << " item " << item;
      } else {
        ASSERT_TRUE(labels[item] == 1 || labels[item] == 2) << labels[item];
        fg_labels.insert(static_cast<int>(labels[item]));
        const Box box = labels[item] == 1 ? Box{0, 0, 0} : Box{1, 6, 4};
        EXPECT_TRUE(MatchesBox(values, item, box, 10, 1, false))
            << "pass " << pass << " item " << item;
      }
    }
  }
  EXPECT_EQ(fg_labels, (std::set<int>{1, 2}));
}

// OpenCV's bilinear resize (half-pixel centres, edge clamping), computed directly.
double Bilinear(int image, int c, int y0, int x0, int box, int crop, int h, int w) {
  auto coord = [&](int d, int* i0, double* frac) {
    const double s = (d + 0.5) * box / crop - 0.5;
    *i0 = static_cast<int>(std::floor(s));
    *frac = s - *i0;
    if (*i0 < 0) *i0 = 0, *frac = 0;
    if (*i0 >= box - 1) *i0 = box - 1, *frac = 0;
  };
  int iy, ix;
  double fy, fx;
  coord(h, &iy, &fy);
  coord(w, &ix, &fx);
  const int iy1 = std::min(iy + 1, box - 1), ix1 = std::min(ix + 1, box - 1);
  auto p = [&](int yy, int xx) { return Pixel(image, c, y0 + yy, x0 + xx); };
  const double v = (1 - fy) * ((1 - fx) * p(iy, ix) + fx * p(iy, ix1)) +
                   fy * ((1 - fx) * p(iy1, ix) + fx * p(iy1, ix1));
  return std::floor(v + 0.5);
}

TEST(WindowDataLayer, WarpMatchesDirectBilinearComputation) {
  Fixture f;
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n1 1.0 2 3 5 6\n");
  auto layer = f.Make("batch_size: 2 fg_fraction: 1",
                      "crop_size: 8 mean_value: 1 mean_value: "
                      "2 mean_value: 3");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), (std::vector<double>{1, 1}));
  const std::vector<double> values = DataOf(data);
  int exact = 0;
  for (int item = 0; item < 2; ++item)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 8; ++h)
        for (int w = 0; w < 8; ++w) {
          const double expected = Bilinear(0, c, 3, 2, 4, 8, h, w) - (c + 1);
          const double actual = values[((item * 3 + c) * 8 + h) * 8 + w];
          ASSERT_LE(std::abs(actual - expected), 1.0) << c << " " << h << " " << w;
          exact += actual == expected;
        }
  EXPECT_GT(exact, 2 * 3 * 64 * 9 / 10);  // OpenCV's fixed-point weights: off by one at most
}

TEST(WindowDataLayer, MirrorFlipsSomeWindows) {
  Fixture f;
  SetRandomSeed(3);
  auto layer = f.Make("batch_size: 4 fg_fraction: 1", "crop_size: 4 mirror: true");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  int flipped = 0, plain = 0;
  for (int pass = 0; pass < 8; ++pass) {
    layer->Forward({}, {&data, &label});
    const std::vector<double> values = DataOf(data);
    for (int item = 0; item < 4; ++item) {
      const Box box = DataOf(label)[item] == 1 ? Box{0, 0, 0} : Box{1, 6, 4};
      if (MatchesBox(values, item, box, 0, 1, true)) {
        ++flipped;
      } else {
        EXPECT_TRUE(MatchesBox(values, item, box, 0, 1, false));
        ++plain;
      }
    }
  }
  EXPECT_GT(flipped, 0);
  EXPECT_GT(plain, 0);
}

TEST(WindowDataLayer, ContextPadLeavesZerosOutsideTheImage) {
  Fixture f;
  // A 4 x 4 box in the top-left corner, grown by context_pad 2 at crop 8: the region is
  // (-2..6) x (-2..6), 2 columns and rows of it outside the image -> 2 zero rows/columns.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n1 1.0 0 0 3 3\n");
  auto layer = f.Make("batch_size: 1 fg_fraction: 1 context_pad: 2", "crop_size: 8");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  layer->Forward({}, {&data, &label});
  const std::vector<double> values = DataOf(data);
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 8; ++h)
      for (int w = 0; w < 8; ++w) {
        const double v = values[(c * 8 + h) * 8 + w];
        if (h < 2 || w < 2) {
          EXPECT_EQ(v, 0) << c << " " << h << " " << w;
        } else if (c > 0) {
          EXPECT_GT(v, 0) << c << " " << h << " " << w;  // channels 1 and 2 are > 0 everywhere
        }
      }
  // The clipped region (0..6) x (0..6), 7 x 7 pixels, is warped to round(7 * 8 / 9) = 6 pixels.
  EXPECT_EQ(values[(1 * 8 + 2) * 8 + 2], Pixel(0, 1, 0, 0));
}

TEST(WindowDataLayer, SquareModeAndCachedImagesGiveTheSameBatches) {
  Fixture f;
  auto run = [&](bool cache) {
    SetRandomSeed(42);
    auto layer = f.Make(std::string("batch_size: 6 crop_mode: 'square' fg_fraction: 0.5") +
                            (cache ? " cache_images: true" : ""),
                        "crop_size: 6 mirror: true", DataType::kFloat32);
    Blob data(DataType::kFloat32), label(DataType::kFloat32);
    layer->SetUp({}, {&data, &label});
    std::vector<double> all;
    for (int pass = 0; pass < 3; ++pass) {
      layer->Forward({}, {&data, &label});
      for (double v : DataOf(data)) all.push_back(v);
      for (double v : DataOf(label)) all.push_back(v);
    }
    return all;
  };
  const std::vector<double> plain = run(false);
  EXPECT_EQ(plain, run(true));
  EXPECT_NE(std::count(plain.begin(), plain.end(), 0.0), static_cast<long>(plain.size()));
}

template <typename E>
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "no error";
}

TEST(WindowDataLayer, Errors) {
  Fixture f;
  Blob data, label;
  auto setup = [&](const std::string& window_extra, const std::string& transform) {
    return [&, window_extra, transform] {
      f.Make(window_extra, transform)->SetUp({}, {&data, &label});
    };
  };
  // A missing image, named with its path.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n1 0.9 0 0 3 3\n# 1\nnope.png\n3 10 12\n0\n");
  std::string e = ErrorOf<RuntimeError>(setup("batch_size: 2", "crop_size: 4"));
  EXPECT_NE(e.find(f.dir + "/nope.png"), std::string::npos) << e;
  EXPECT_NE(e.find("(WindowData)"), std::string::npos) << e;
  // A missing window file.
  std::remove(f.windows.c_str());
  e = ErrorOf<RuntimeError>(setup("batch_size: 2", "crop_size: 4"));
  EXPECT_NE(e.find(f.windows), std::string::npos) << e;
  // A foreground window labelled background.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n0 0.9 0 0 3 3\n");
  e = ErrorOf<RuntimeError>(setup("batch_size: 2", "crop_size: 4"));
  EXPECT_NE(e.find("class_index 0"), std::string::npos) << e;
  // A truncated window line.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n2\n1 0.9 0 0 3 3\n1 0.9 0\n");
  e = ErrorOf<RuntimeError>(setup("batch_size: 2", "crop_size: 4"));
  EXPECT_NE(e.find("window 2 of 2"), std::string::npos) << e;
  // No background window while the batch needs some.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n1 0.9 0 0 3 3\n");
  e = ErrorOf<RuntimeError>(setup("batch_size: 4", "crop_size: 4"));
  EXPECT_NE(e.find("no background window"), std::string::npos) << e;
  // A window outside its image is reported at Forward.
  f.WriteWindows("# 0\nimg0.png\n3 10 12\n1\n1 0.9 5 5 20 8\n");
  auto layer = f.Make("batch_size: 1 fg_fraction: 1", "crop_size: 4");
  layer->SetUp({}, {&data, &label});
  e = ErrorOf<RuntimeError>([&] { layer->Forward({}, {&data, &label}); });
  EXPECT_NE(e.find("outside image"), std::string::npos) << e;
  // Parameters.
  EXPECT_NE(ErrorOf<ConfigError>(setup("batch_size: 1", "")).find("crop_size"), std::string::npos);
  EXPECT_NE(ErrorOf<ConfigError>(setup("batch_size: 1 crop_mode: 'round'", "crop_size: 4"))
                .find("crop_mode"),
            std::string::npos);
  EXPECT_NE(ErrorOf<ConfigError>(setup("batch_size: 1 context_pad: 2", "crop_size: 4"))
                .find("context_pad"),
            std::string::npos);
}

}  // namespace
}  // namespace crema::testing
