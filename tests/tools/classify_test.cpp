// crema classify end to end: a tiny net whose probabilities are the softmax of the images'
// per-channel means (computed here in double), the CSV and JSON-lines output, batching, list and
// folder inputs, unreadable images; and the real SqueezeNet v1.0 on two photos when
// ../shared/reference is present.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "image_tool_util.hpp"
#include "io/json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using testing::CsvRow;
using testing::Lines;
using testing::RunCrema;
using testing::WritePng;
using testing::WriteText;

// Global average pooling of a 3 x 2 x 2 input: one score per channel (B, G, R), no softmax.
constexpr char kPoolNet[] = R"(name: "means"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 2 dim: 2 } } }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool"
        pooling_param { pool: AVE global_pooling: true } }
)";
constexpr char kSoftmaxLayer[] =
    R"(layer { name: "prob" type: "Softmax" bottom: "pool" top: "prob" })";

std::vector<double> Softmax(std::vector<double> x) {
  double sum = 0;
  for (double& v : x) sum += (v = std::exp(v));
  for (double& v : x) v /= sum;
  return x;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ClassifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CREMA_WITH_OPENCV
    GTEST_SKIP() << "crema was built without OpenCV";
#endif
    for (const char* type : {"Input", "Pooling", "Softmax", "Convolution", "Concat", "ReLU"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/classify_" + info->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/images");
    WriteText(dir_ + "/pool.prototxt", kPoolNet);
    WriteText(dir_ + "/softmax.prototxt", std::string(kPoolNet) + kSoftmaxLayer);
    WriteText(dir_ + "/empty.caffemodel", "");  // no layers: nothing to copy
    WriteText(dir_ + "/labels.txt", "blue\ngreen\nred, \"crimson\"\n");
    // Solid colours (WritePng takes RGB): a = (R 10, G 20, B 30), b = (R 50, G 0, B 0).
    Solid("a.png", 10, 20, 30);
    Solid("b.png", 50, 0, 0);
    Solid("d.png", 0, 40, 0);
    // 4 x 4 black with a green (100) 2 x 2 centre.
    std::vector<uint8_t> c(4 * 4 * 3, 0);
    for (int y = 1; y < 3; ++y)
      for (int x = 1; x < 3; ++x) c[(y * 4 + x) * 3 + 1] = 100;
    WritePng(dir_ + "/images/c.png", 4, 4, 3, c);
    WriteText(dir_ + "/images/bad.png", "this is not a png");
    WriteText(dir_ + "/images/notes.txt", "not an image");
  }
  void Solid(const std::string& name, uint8_t r, uint8_t g, uint8_t b) {
    std::vector<uint8_t> pixels(12);
    for (int i = 0; i < 4; ++i) {
      pixels[3 * i] = r;
      pixels[3 * i + 1] = g;
      pixels[3 * i + 2] = b;
    }
    WritePng(dir_ + "/images/" + name, 2, 2, 3, pixels);
  }
  std::string Image(const std::string& name) { return dir_ + "/images/" + name; }
  // Runs classify with the pool net (or `net`), the results in `out`.
  testing::CremaResult Classify(const std::string& flags, const std::string& out,
                                const std::string& net = "pool") {
    return RunCrema("classify --model " + dir_ + "/" + net + ".prototxt --weights " + dir_ +
                    "/empty.caffemodel --labels " + dir_ + "/labels.txt --out " + out + " " +
                    flags);
  }
  std::string dir_;
};

TEST_F(ClassifyTest, CsvRowsAreTheSoftmaxOfTheChannelMeans) {
  const std::string out = dir_ + "/out.csv";
  const auto r = Classify("--scale 0.1 --top_k 3 " + Image("a.png") + " " + Image("b.png"), out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("comes from a Pooling layer, not Softmax: applying softmax"),
            std::string::npos)
      << r.output;
  const auto lines = Lines(Slurp(out));
  ASSERT_EQ(lines.size(), 7u) << Slurp(out);
  EXPECT_EQ(lines[0], "path,rank,class,label,prob,error");
  // a.png in BGR order is (30, 20, 10), times 0.1.
  const std::vector<double> a = Softmax({3, 2, 1});
  const char* a_labels[3] = {"blue", "green", "red, \"crimson\""};
  for (int rank = 1; rank <= 3; ++rank) {
    const auto row = CsvRow(lines[rank]);
    ASSERT_EQ(row.size(), 6u) << lines[rank];
    EXPECT_EQ(row[0], Image("a.png"));
    EXPECT_EQ(row[1], std::to_string(rank));
    EXPECT_EQ(row[2], std::to_string(rank - 1));
    EXPECT_EQ(row[3], a_labels[rank - 1]);
    EXPECT_NEAR(std::stod(row[4]), a[rank - 1], 1e-5);
    EXPECT_EQ(row[5], "");
  }
  const auto b_top = CsvRow(lines[4]);  // b = (0, 0, 5): red first
  EXPECT_EQ(b_top[2], "2");
  EXPECT_NEAR(std::stod(b_top[4]), Softmax({0, 0, 5})[2], 1e-5);
}

TEST_F(ClassifyTest, ASoftmaxOutputIsNotSoftmaxedAgain) {
  const std::string pool = dir_ + "/pool.csv", softmax = dir_ + "/softmax.csv";
  ASSERT_EQ(Classify("--scale 0.1 " + Image("a.png"), pool).rc, 0);
  const auto r = Classify("--scale 0.1 " + Image("a.png"), softmax, "softmax");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(r.output.find("applying softmax"), std::string::npos) << r.output;
  EXPECT_EQ(Slurp(pool), Slurp(softmax));
}

TEST_F(ClassifyTest, JsonLines) {
  const std::string out = dir_ + "/out.jsonl";
  const auto r = Classify(
      "--format jsonl --top_k 2 --mean_values 30,20,10 " + Image("a.png") + " " + Image("bad.png"),
      out);
  EXPECT_EQ(r.rc, 1) << r.output;
  const auto lines = Lines(Slurp(out));
  ASSERT_EQ(lines.size(), 2u);
  const Json first = ParseJson(lines[0]);
  EXPECT_EQ(first["path"].string, Image("a.png"));
  ASSERT_EQ(first["top"].size(), 2u);
  EXPECT_EQ(first["top"][0]["rank"].number, 1);
  EXPECT_EQ(first["top"][0]["label"].string, "blue");          // a tie: the lower class first
  EXPECT_NEAR(first["top"][0]["prob"].number, 1.0 / 3, 1e-6);  // the mean removes everything
  EXPECT_EQ(first["top"][1]["class"].number, 1);
  const Json second = ParseJson(lines[1]);
  EXPECT_EQ(second["path"].string, Image("bad.png"));
  EXPECT_NE(second["error"].string.find("cannot decode"), std::string::npos);
}

TEST_F(ClassifyTest, BatchesGiveTheSameResultsAsSingleImages) {
  std::string images;
  for (const char* name : {"a.png", "b.png", "d.png", "b.png", "a.png"})
    images += " " + Image(name);
  const std::string one = dir_ + "/one.csv", three = dir_ + "/three.csv";
  ASSERT_EQ(Classify("--batch 1 --scale 0.05" + images, one).rc, 0);
  ASSERT_EQ(Classify("--batch 3 --scale 0.05" + images, three).rc, 0);
  EXPECT_EQ(Lines(Slurp(one)).size(), 1u + 5 * 3);
  EXPECT_EQ(Slurp(one), Slurp(three));
}

TEST_F(ClassifyTest, ListAndDirectory) {
  // The list uses convert-imageset's "path label" lines, relative to the list's folder.
  WriteText(dir_ + "/images/list.txt", "a.png 0\nb.png 2\n\nd.png\n");
  const std::string paths = dir_ + "/paths.csv", list = dir_ + "/list.csv",
                    folder = dir_ + "/dir.csv";
  ASSERT_EQ(Classify(Image("a.png") + " " + Image("b.png") + " " + Image("d.png"), paths).rc, 0);
  const auto r = Classify("--list " + dir_ + "/images/list.txt", list);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(Slurp(paths), Slurp(list));
  // The folder: a, b, bad, c, d (sorted; notes.txt and list.txt are not images); bad fails.
  const auto d = Classify("--top_k 1 --dir " + dir_ + "/images", folder);
  EXPECT_EQ(d.rc, 1) << d.output;
  EXPECT_NE(d.output.find("1 of 5 image(s) could not be classified"), std::string::npos)
      << d.output;
  const auto lines = Lines(Slurp(folder));
  ASSERT_EQ(lines.size(), 6u) << Slurp(folder);
  const char* order[5] = {"a.png", "b.png", "bad.png", "c.png", "d.png"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(CsvRow(lines[i + 1])[0], Image(order[i]));
  EXPECT_EQ(CsvRow(lines[3])[1], "");
  EXPECT_NE(CsvRow(lines[3])[5].find("cannot decode"), std::string::npos);
}

TEST_F(ClassifyTest, PreprocessingFlags) {
  auto top = [&](const std::string& flags, const std::string& image) {
    const std::string out = dir_ + "/pre.csv";
    const auto r = Classify("--top_k 3 " + flags + " " + Image(image), out);
    EXPECT_EQ(r.rc, 0) << r.output;
    std::vector<double> probs(3);
    for (const auto& line : Lines(Slurp(out)))
      if (line.rfind("path,", 0) != 0)
        probs[std::stoi(CsvRow(line)[2])] = std::stod(CsvRow(line)[4]);
    return probs;
  };
  auto expect = [](const std::vector<double>& got, const std::vector<double>& want) {
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2e-6) << c;
  };
  // raw_scale maps 0-255 onto 0-raw_scale before the mean; scale multiplies after it.
  expect(top("--raw_scale 1", "a.png"), Softmax({30 / 255.0, 20 / 255.0, 10 / 255.0}));
  expect(top("--mean_values 10 --scale 0.2", "a.png"), Softmax({4, 2, 0}));
  // RGB order for the net.
  expect(top("--channel_swap 2,1,0 --scale 0.1", "a.png"), Softmax({1, 2, 3}));
  // A mean file contributes its per-channel means (30, 20, 10 here, varying over pixels).
  BlobProto mean;
  for (int d : {1, 3, 4, 4}) mean.mutable_shape()->add_dim(d);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 16; ++i) mean.add_data(static_cast<float>(30 - 10 * c + (i % 2 ? 5 : -5)));
  std::string bytes;
  mean.SerializeToString(&bytes);
  WriteText(dir_ + "/mean.binaryproto", bytes);
  expect(top("--mean_file " + dir_ + "/mean.binaryproto --scale 0.1", "b.png"),
         Softmax({-3, -2, 4}));
  // Resize to 4x4 (c.png is 4x4 already) and crop the centre 2x2: all green 100.
  expect(top("--resize 4x4 --center_crop --scale 0.1", "c.png"), Softmax({0, 10, 0}));
  // Default: c.png resized to 2x2; bilinear halving averages each 2x2 block, so each output
  // pixel holds one centre pixel of four: green 25.
  expect(top("--scale 0.1", "c.png"), Softmax({0, 2.5, 0}));
}

TEST_F(ClassifyTest, BadFlags) {
  const std::string out = dir_ + "/x.csv";
  for (const char* flags :
       {"--resize 4x4", "--resize 1x1 --center_crop", "--resize 4", "--format xml",
        "--mean_values 1,2", "--channel_swap 0,1,3", "--top_k 0", "--interpolation sinc", ""}) {
    const auto r = Classify(std::string(flags) + (*flags ? " " + Image("a.png") : ""), out);
    EXPECT_EQ(r.rc, 2) << flags << "\n" << r.output;
  }
  WriteText(dir_ + "/two_labels.txt", "x\ny\n");
  const auto r =
      RunCrema("classify --model " + dir_ + "/pool.prototxt --weights " + dir_ +
               "/empty.caffemodel --labels " + dir_ + "/two_labels.txt " + Image("a.png"));
  EXPECT_EQ(r.rc, 2) << r.output;
}

// SqueezeNet v1.0 (ImageNet): resize 256x256, centre crop 227, mean (104, 117, 123), BGR; its
// output is global pooling, softmaxed by classify. The reference README gives about 0.70 for the
// cat and 0.96 for the espresso; the tolerances reject RGB order, a missing mean or no crop.
TEST_F(ClassifyTest, SqueezeNetOnRealPhotos) {
  CREMA_REQUIRE_REFERENCE(model, "real/models/squeezenet_v1.0");
  CREMA_REQUIRE_REFERENCE(images, "real/images");
  CREMA_REQUIRE_REFERENCE(synsets, "real/imagenet/synset_words.txt");
  auto run = [&](const std::string& flags) {
    const std::string out = dir_ + "/squeezenet.jsonl";
    const auto r = RunCrema("classify --model " + model + "/SqueezeNet_deploy.prototxt --weights " +
                            model + "/squeezenet_v1.0_dc_decoded.caffemodel --labels " + synsets +
                            " --format jsonl --top_k 5 --batch 2 --out " + out + " " + flags + " " +
                            images + "/chelsea.png " + images + "/coffee.png");
    EXPECT_EQ(r.rc, 0) << r.output;
    std::vector<std::pair<std::string, double>> top1;
    for (const auto& line : Lines(Slurp(out))) {
      const Json row = ParseJson(line);
      top1.emplace_back(row["top"][0]["label"].string, row["top"][0]["prob"].number);
    }
    return top1;
  };
  auto correct = [](const std::vector<std::pair<std::string, double>>& top1) {
    return top1.size() == 2 && top1[0].first == "n02124075 Egyptian cat" &&
           std::fabs(top1[0].second - 0.70) <= 0.04 && top1[1].first == "n07920052 espresso" &&
           std::fabs(top1[1].second - 0.96) <= 0.02;
  };
  const std::string caffe =
      "--mean_values 104,117,123 --resize 256x256 --center_crop --interpolation area";
  const auto top1 = run(caffe);
  ASSERT_EQ(top1.size(), 2u);
  EXPECT_TRUE(correct(top1)) << top1[0].first << " " << top1[0].second << ", " << top1[1].first
                             << " " << top1[1].second;
  // Wrong preprocessing falls outside the tolerances.
  EXPECT_FALSE(correct(run(caffe + " --channel_swap 2,1,0")));
  EXPECT_FALSE(correct(run("--resize 256x256 --center_crop --interpolation area")));
  EXPECT_FALSE(correct(run("--mean_values 104,117,123 --interpolation area")));
}

}  // namespace
}  // namespace crema
