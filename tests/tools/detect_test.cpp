// crema detect end to end on a tiny SSD whose detections are known by construction: the input
// (16 x 16, 3 channels) is average-pooled to a 2 x 2 feature map with one 8 x 8 prior per cell, so
// the priors are the four quadrants of the image; the location convolution is all zero (every
// box decodes to its prior) and the confidence convolution gives background 0, "cat" the cell's
// mean red and "dog" its mean green (times --scale), softmaxed. A quadrant that is red 255 (with
// --scale 0.02: logit 5.1) is a cat of score e^5.1 / (e^5.1 + 2) at that quadrant, in pixels of
// the image as given; a black quadrant gives cat and dog 1/3 each. Checked: CSV and JSON lines,
// the threshold, labels from a label map, batching, --list and --dir, --draw's images (PPM, read
// back here: boxes in the class colour, the rest untouched), and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "crema/proto.hpp"
#include "image_tool_util.hpp"
#include "io/json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::CsvRow;
using testing::Lines;
using testing::ReadFile;
using testing::RunCrema;
using testing::WritePng;
using testing::WriteText;

constexpr char kTinySsd[] = R"(name: "tiny_ssd"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 3 dim: 16 dim: 16 } } }
layer { name: "pool" type: "Pooling" bottom: "data" top: "feat"
        pooling_param { pool: AVE kernel_size: 8 stride: 8 } }
layer { name: "loc" type: "Convolution" bottom: "feat" top: "loc"
        convolution_param { num_output: 4 kernel_size: 1
          weight_filler { type: "gaussian" std: 1 } bias_filler { type: "constant" value: 0.5 } } }
layer { name: "loc_perm" type: "Permute" bottom: "loc" top: "loc_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "loc_flat" type: "Flatten" bottom: "loc_perm" top: "loc_flat" }
layer { name: "conf" type: "Convolution" bottom: "feat" top: "conf"
        convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "conf_perm" type: "Permute" bottom: "conf" top: "conf_perm"
        permute_param { order: 0 order: 2 order: 3 order: 1 } }
layer { name: "conf_flat" type: "Flatten" bottom: "conf_perm" top: "conf_flat" }
layer { name: "conf_reshape" type: "Reshape" bottom: "conf_flat" top: "conf_reshape"
        reshape_param { shape { dim: 0 dim: -1 dim: 3 } } }
layer { name: "conf_softmax" type: "Softmax" bottom: "conf_reshape" top: "conf_softmax"
        softmax_param { axis: 2 } }
layer { name: "conf_out" type: "Flatten" bottom: "conf_softmax" top: "conf_out" }
layer { name: "prior" type: "PriorBox" bottom: "feat" bottom: "data" top: "prior"
        prior_box_param { min_size: 8 step: 8 offset: 0.5
                          variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }
layer { name: "detection_out" type: "DetectionOutput" bottom: "loc_flat" bottom: "conf_out"
        bottom: "prior" top: "detection_out"
        detection_output_param { num_classes: 3 background_label_id: 0 code_type: CENTER_SIZE
          nms_param { nms_threshold: 0.45 top_k: 100 } keep_top_k: 100
          confidence_threshold: 0.01 } }
)";

// A net without a detection table: its output is the pooled 2 x 2 map.
constexpr char kPoolOnly[] = R"(name: "not_a_detector"
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } } }
layer { name: "pool" type: "Pooling" bottom: "data" top: "feat"
        pooling_param { pool: AVE kernel_size: 8 stride: 8 } }
layer { name: "conf" type: "Convolution" bottom: "feat" top: "conf"
        convolution_param { num_output: 3 kernel_size: 1 } }
)";

constexpr char kLabelMap[] =
    R"(item { name: "none_of_the_above" label: 0 display_name: "background" }
item { name: "cat" label: 1 display_name: "cat" }
item { name: "dog" label: 2 display_name: "dog, big" }
)";

void AddBlob(LayerParameter* layer, const std::vector<int>& shape,
             const std::vector<float>& values) {
  BlobProto* blob = layer->add_blobs();
  for (int d : shape) blob->mutable_shape()->add_dim(d);
  for (float v : values) blob->add_data(v);
}

// loc: all zero. conf (3 outputs from B, G, R): background 0, cat = R, dog = G.
std::string TinySsdWeights() {
  NetParameter net;
  net.set_name("tiny_ssd");
  LayerParameter* loc = net.add_layer();
  loc->set_name("loc");
  loc->set_type("Convolution");
  AddBlob(loc, {4, 3, 1, 1}, std::vector<float>(12, 0.f));
  AddBlob(loc, {4}, std::vector<float>(4, 0.f));
  LayerParameter* conf = net.add_layer();
  conf->set_name("conf");
  conf->set_type("Convolution");
  AddBlob(conf, {3, 3, 1, 1}, {0, 0, 0, 0, 0, 1, 0, 1, 0});
  AddBlob(conf, {3}, {0, 0, 0});
  std::string bytes;
  net.SerializeToString(&bytes);
  return bytes;
}

// Scores of a cell whose cat and dog logits are `cat` and `dog` (background 0).
double CatScore(double cat, double dog) {
  return std::exp(cat) / (1 + std::exp(cat) + std::exp(dog));
}

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

std::ostream& operator<<(std::ostream& out, const Rgb& c) {
  return out << "(" << int(c.r) << ", " << int(c.g) << ", " << int(c.b) << ")";
}

struct Image {
  int width = 0, height = 0;
  std::vector<Rgb> pixels;  // row-major
  Rgb at(int x, int y) const { return pixels[y * width + x]; }
};

// A black image with quadrant (qx, qy) of a 2 x 2 grid filled with `colour`, per entry.
Image Quadrants(int width, int height, const std::vector<std::pair<int, Rgb>>& cells) {
  Image image{width, height, std::vector<Rgb>(width * height)};
  for (const auto& [cell, colour] : cells) {
    const int qx = cell % 2, qy = cell / 2;
    for (int y = qy * height / 2; y < (qy + 1) * height / 2; ++y)
      for (int x = qx * width / 2; x < (qx + 1) * width / 2; ++x)
        image.pixels[y * width + x] = colour;
  }
  return image;
}

void WritePpm(const std::string& path, const Image& image) {
  std::ofstream out(path, std::ios::binary);
  out << "P6\n" << image.width << " " << image.height << "\n255\n";
  for (const Rgb& c : image.pixels) out.put(c.r).put(c.g).put(c.b);
}

void WritePngImage(const std::string& path, const Image& image) {
  std::vector<uint8_t> bytes;
  for (const Rgb& c : image.pixels) bytes.insert(bytes.end(), {c.r, c.g, c.b});
  WritePng(path, image.height, image.width, 3, bytes);
}

// A binary PPM (P6, maxval 255) as OpenCV writes it; width 0 when it is not one.
Image ReadPpm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  in >> magic;
  Image image;
  auto number = [&]() {
    while (in >> std::ws && in.peek() == '#') in.ignore(1 << 20, '\n');
    int v = 0;
    in >> v;
    return v;
  };
  if (magic != "P6") return image;
  const int width = number(), height = number(), maxval = number();
  in.get();
  if (maxval != 255 || width <= 0 || height <= 0) return image;
  image.width = width;
  image.height = height;
  image.pixels.resize(width * height);
  for (Rgb& c : image.pixels) {
    c.r = static_cast<uint8_t>(in.get());
    c.g = static_cast<uint8_t>(in.get());
    c.b = static_cast<uint8_t>(in.get());
  }
  if (!in) image.width = 0;
  return image;
}

// One expected box.
struct Box {
  std::string image;
  int label;
  std::string name;
  double score;
  double x1, y1, x2, y2;
};

void ExpectCsvRow(const std::string& line, const Box& box) {
  const std::vector<std::string> row = CsvRow(line);
  ASSERT_EQ(row.size(), 8u) << line;
  EXPECT_EQ(row[0], box.image) << line;
  EXPECT_EQ(row[1], std::to_string(box.label)) << line;
  EXPECT_EQ(row[2], box.name) << line;
  EXPECT_NEAR(std::stod(row[3]), box.score, 1e-4) << line;
  EXPECT_NEAR(std::stod(row[4]), box.x1, 0.01) << line;
  EXPECT_NEAR(std::stod(row[5]), box.y1, 0.01) << line;
  EXPECT_NEAR(std::stod(row[6]), box.x2, 0.01) << line;
  EXPECT_NEAR(std::stod(row[7]), box.y2, 0.01) << line;
}

const Rgb kRed{255, 0, 0};
const Rgb kGreen100{0, 100, 0};
// Tableau 10 colours of labels 1 and 2 (RGB).
const Rgb kCatColour{255, 127, 14};
const Rgb kDogColour{44, 160, 44};

class DetectTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CREMA_WITH_OPENCV
    GTEST_SKIP() << "crema was built without OpenCV";
#endif
    for (const char* type : {"Input", "Pooling", "Convolution", "Permute", "Flatten", "Reshape",
                             "Softmax", "PriorBox", "DetectionOutput"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/detect_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/images");
    WriteText(dir_ + "/ssd.prototxt", kTinySsd);
    WriteText(dir_ + "/pool.prototxt", kPoolOnly);
    WriteText(dir_ + "/ssd.caffemodel", TinySsdWeights());
    WriteText(dir_ + "/labelmap.prototxt", kLabelMap);
    // a: 256 x 128, a red top-left quadrant (cat) and a green 100 bottom-right one (dog);
    // b: 40 x 80, a red bottom-left quadrant; c: 30 x 30 black. The warp to 16 x 16 keeps each
    // quadrant whole (bilinear samples never straddle a quadrant edge at these sizes).
    a_ = Quadrants(256, 128, {{0, kRed}, {3, kGreen100}});
    c_ = Quadrants(30, 30, {});
    WritePpm(Path("a.ppm"), a_);
    WritePngImage(Path("b.png"), Quadrants(40, 80, {{2, kRed}}));
    WritePpm(Path("c.ppm"), c_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/images/" + name; }
  testing::CremaResult Detect(const std::string& flags, const std::string& net = "ssd") {
    return RunCrema("detect --model " + dir_ + "/" + net + ".prototxt --weights " + dir_ +
                    "/ssd.caffemodel --scale 0.02 " + flags);
  }
  // The boxes of a, b and c at the default threshold 0.5.
  std::vector<Box> DefaultBoxes(bool names) const {
    return {{Path("a.ppm"), 1, names ? "cat" : "", CatScore(5.1, 0), 0, 0, 128, 64},
            {Path("a.ppm"), 2, names ? "dog, big" : "", CatScore(2.0, 0), 128, 64, 256, 128},
            {Path("b.png"), 1, names ? "cat" : "", CatScore(5.1, 0), 0, 40, 20, 80}};
  }
  std::string AllImages() const {
    return Path("a.ppm") + " " + Path("b.png") + " " + Path("c.ppm");
  }
  std::string dir_;
  Image a_, c_;
};

TEST_F(DetectTest, CsvHasOneRowPerBoxInPixelsOfTheOriginalImage) {
  const std::string out = dir_ + "/out.csv";
  const auto r = Detect("--out " + out + " " + AllImages());
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto lines = Lines(ReadFile(out));
  ASSERT_EQ(lines.size(), 4u) << ReadFile(out);
  EXPECT_EQ(lines[0], "image,class_id,class_name,score,x1,y1,x2,y2");
  const std::vector<Box> boxes = DefaultBoxes(false);
  for (size_t i = 0; i < boxes.size(); ++i) ExpectCsvRow(lines[i + 1], boxes[i]);
}

TEST_F(DetectTest, LabelMapNamesTheClassesAndCsvQuotesThem) {
  const std::string out = dir_ + "/out.csv";
  const auto r =
      Detect("--labelmap " + dir_ + "/labelmap.prototxt --out " + out + " " + AllImages());
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto lines = Lines(ReadFile(out));
  ASSERT_EQ(lines.size(), 4u) << ReadFile(out);
  EXPECT_NE(lines[2].find(",\"dog, big\","), std::string::npos) << lines[2];
  const std::vector<Box> boxes = DefaultBoxes(true);
  for (size_t i = 0; i < boxes.size(); ++i) ExpectCsvRow(lines[i + 1], boxes[i]);
}

TEST_F(DetectTest, JsonLinesOnStdout) {
  // One image per forward pass, so that image_id 0 holds each image in turn.
  const auto r =
      Detect("--format jsonl --batch 1 --labelmap " + dir_ + "/labelmap.prototxt " + AllImages());
  ASSERT_EQ(r.rc, 0) << r.output;
  std::vector<Json> rows;
  for (const std::string& line : Lines(r.output))
    if (!line.empty() && line[0] == '{') rows.push_back(ParseJson(line));
  const std::vector<Box> boxes = DefaultBoxes(true);
  ASSERT_EQ(rows.size(), boxes.size()) << r.output;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Json& row = rows[i];
    EXPECT_EQ(row["image"].string, boxes[i].image);
    EXPECT_EQ(row["class_id"].number, boxes[i].label);
    EXPECT_EQ(row["class"].string, boxes[i].name);
    EXPECT_NEAR(row["score"].number, boxes[i].score, 1e-4);
    ASSERT_EQ(row["box"].size(), 4u) << row.Dump();
    const double expected[4] = {boxes[i].x1, boxes[i].y1, boxes[i].x2, boxes[i].y2};
    for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(row["box"][k].number, expected[k], 0.01);
  }
}

TEST_F(DetectTest, ThresholdKeepsTheScoresAtOrAboveIt) {
  const auto count = [&](const std::string& threshold) {
    const std::string out = dir_ + "/t" + threshold + ".csv";
    const auto r = Detect("--threshold " + threshold + " --out " + out + " " + AllImages());
    EXPECT_EQ(r.rc, 0) << r.output;
    return static_cast<int>(Lines(ReadFile(out)).size()) - 1;
  };
  EXPECT_EQ(count("0.9"), 2);  // the red quadrants' cats (0.988)
  EXPECT_EQ(count("0.5"), 3);  // and the dog (0.787)
  // Black quadrants give cat and dog 1/3 each: a has 2 + 2 of them (and its cat and dog), b 3 + 3
  // (and its cat), c 4 + 4.
  EXPECT_EQ(count("0.3"), (2 + 2 + 2) + (3 + 3 + 1) + (4 + 4));
  EXPECT_EQ(count("1"), 0);
}

TEST_F(DetectTest, ListAndDirGiveTheSameImages) {
  WriteText(dir_ + "/images/list.txt", "a.ppm 0\nb.png\n\nc.ppm 3\n");
  WriteText(dir_ + "/images/notes.txt", "not an image");
  const std::string by_list = dir_ + "/list.csv", by_dir = dir_ + "/dir.csv";
  const auto l = Detect("--out " + by_list + " --list " + dir_ + "/images/list.txt");
  ASSERT_EQ(l.rc, 0) << l.output;
  const auto d = Detect("--out " + by_dir + " --dir " + dir_ + "/images");
  ASSERT_EQ(d.rc, 0) << d.output;
  const auto list_lines = Lines(ReadFile(by_list)), dir_lines = Lines(ReadFile(by_dir));
  ASSERT_EQ(list_lines.size(), 4u) << ReadFile(by_list);
  ASSERT_EQ(dir_lines.size(), 4u) << ReadFile(by_dir);
  const std::vector<Box> boxes = DefaultBoxes(false);
  for (size_t i = 0; i < boxes.size(); ++i) {
    ExpectCsvRow(list_lines[i + 1], boxes[i]);
    ExpectCsvRow(dir_lines[i + 1], boxes[i]);
  }
}

TEST_F(DetectTest, DrawWritesEachImageWithItsBoxesInTheClassColour) {
  const std::string drawn = dir_ + "/drawn/sub";  // created, parents too
  const auto r =
      Detect("--labelmap " + dir_ + "/labelmap.prototxt --draw " + drawn + " " + AllImages());
  ASSERT_EQ(r.rc, 0) << r.output;
  const Image a = ReadPpm(drawn + "/a.ppm");
  ASSERT_EQ(a.width, 256) << "not a 256 x 128 PPM: " << drawn << "/a.ppm";
  ASSERT_EQ(a.height, 128);
  // The cat box is pixels [0, 128) x [0, 64): its bottom and right edges are orange; the dog box
  // [128, 256) x [64, 128) has green edges.
  EXPECT_EQ(a.at(64, 63), kCatColour);
  EXPECT_EQ(a.at(127, 40), kCatColour);
  EXPECT_EQ(a.at(192, 127), kDogColour);
  EXPECT_EQ(a.at(255, 96), kDogColour);
  // Inside the boxes, below the labels, and away from them the image is untouched.
  EXPECT_EQ(a.at(64, 40), kRed);
  EXPECT_EQ(a.at(192, 110), kGreen100);
  EXPECT_EQ(a.at(10, 100), (Rgb{0, 0, 0}));
  // Somewhere the label bands were drawn: more class-coloured pixels than the edges alone.
  int cat_pixels = 0;
  for (const Rgb& p : a.pixels) cat_pixels += p == kCatColour ? 1 : 0;
  EXPECT_GT(cat_pixels, 2 * (128 + 64) + 50);
  // c has no box: drawn unchanged.
  const Image c = ReadPpm(drawn + "/c.ppm");
  ASSERT_EQ(c.width, 30);
  EXPECT_TRUE(c.pixels == c_.pixels);
  // b keeps its format.
  EXPECT_EQ(ReadFile(drawn + "/b.png").substr(0, 4), "\x89PNG");
  // Nothing else is left there (no temporary folder).
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(drawn)) ++entries;
  EXPECT_EQ(entries, 3);
  // A second run does not overwrite them.
  const auto again = Detect("--draw " + drawn + " " + Path("a.ppm"));
  EXPECT_EQ(again.rc, 1) << again.output;
  EXPECT_NE(again.output.find("exists already"), std::string::npos) << again.output;
}

TEST_F(DetectTest, UnreadableImagesAreNamedAndNothingIsWritten) {
  WriteText(Path("bad.png"), "this is not a png");
  const std::string out = dir_ + "/out.csv", drawn = dir_ + "/drawn";
  const auto r = Detect("--out " + out + " --draw " + drawn + " " + Path("a.ppm") + " " +
                        Path("bad.png") + " " + Path("missing.jpg") + " " + Path("c.ppm"));
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find(Path("bad.png") + ": cannot decode"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(Path("missing.jpg") + ": no such file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 of 4 image(s) could not be read"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
  int drawn_files = 0;
  for (fs::recursive_directory_iterator it(drawn), end; it != end; ++it) ++drawn_files;
  EXPECT_EQ(drawn_files, 0);
}

TEST_F(DetectTest, ANetWithoutADetectionOutputIsRefusedByName) {
  const auto r = Detect(Path("a.ppm"), "pool");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("net \"not_a_detector\" has no detection output"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\"conf\" (1 x 3 x 2 x 2)"), std::string::npos) << r.output;
}

TEST_F(DetectTest, BadFlagsAreUsageErrors) {
  const std::string a = " " + Path("a.ppm");
  struct Case {
    std::string flags, message;
  };
  const std::vector<Case> cases = {
      {"--threshold 1.5" + a, "--threshold must be between 0 and 1"},
      {"--format xml" + a, "--format must be csv or jsonl for detect"},
      {"--top_k 3" + a, "--top_k is not a flag of `crema detect`"},
      {"--mean_values 1,2" + a, "--mean_values has 2 values"},
      {"--output " + dir_ + "/x.csv" + a, "--output is not a flag of `crema detect`"},
      {"", "detect: no images"},
      {"--draw " + dir_ + "/d " + Path("a.ppm") + " " + dir_ + "/a.ppm", "have the same file name"},
  };
  WritePpm(dir_ + "/a.ppm", a_);
  for (const Case& c : cases) {
    const auto r = Detect(c.flags);
    EXPECT_EQ(r.rc, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ + "/d/a.ppm"));
  // A label map that is not one is a config error naming it; a missing one, a runtime error.
  WriteText(dir_ + "/bad_labelmap.prototxt", "item { name: \"cat\" label: \"one\" }\n");
  const auto bad = Detect("--labelmap " + dir_ + "/bad_labelmap.prototxt" + a);
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_NE(bad.output.find("bad_labelmap.prototxt:1:"), std::string::npos) << bad.output;
  const auto missing = Detect("--labelmap " + dir_ + "/missing.prototxt" + a);
  EXPECT_EQ(missing.rc, 1) << missing.output;
  EXPECT_NE(missing.output.find("missing.prototxt"), std::string::npos) << missing.output;
}

TEST_F(DetectTest, HelpListsItsFlags) {
  const auto r = RunCrema("detect --help");
  ASSERT_EQ(r.rc, 0) << r.output;
  for (const char* flag :
       {"--labelmap", "--threshold", "--format", "--out", "--draw", "--mean_values", "--scale",
        "--channel_swap", "--interpolation", "--list", "--dir", "--batch"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " missing from:\n" << r.output;
}

}  // namespace
}  // namespace crema
