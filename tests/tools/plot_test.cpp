// `crema plot`: the SVG's polylines hold one point per record, placed monotonically (linearly,
// or log-linearly for a wide lr range) in the values written; the PNG decodes; bad input names
// FILE:LINE and writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "image_tool_util.hpp"
#include "regression_solver.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RegressionLoss;
using testing::RunCrema;

struct Point {
  double x, y;
};

// data-series -> points of every <polyline> in an SVG.
std::map<std::string, std::vector<Point>> Polylines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  std::map<std::string, std::vector<Point>> out;
  const std::regex polyline("<polyline data-series=\"([^\"]*)\"[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline);
       it != std::sregex_iterator(); ++it) {
    std::vector<Point>& points = out[(*it)[1]];
    std::istringstream pairs((*it)[2].str());
    std::string pair;
    while (pairs >> pair) {
      const size_t comma = pair.find(',');
      points.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
    }
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Checks that y = a + b * value for every point (b < 0: larger values are drawn higher, SVG's y
// grows downwards), to the 0.01 px the SVG is written with.
void ExpectLinear(const std::vector<Point>& points, const std::vector<double>& values,
                  const std::string& what) {
  ASSERT_EQ(points.size(), values.size()) << what;
  size_t lo = 0, hi = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < values[lo]) lo = i;
    if (values[i] > values[hi]) hi = i;
  }
  ASSERT_LT(values[lo], values[hi]) << what;
  const double b = (points[hi].y - points[lo].y) / (values[hi] - values[lo]);
  EXPECT_LT(b, 0) << what << ": the largest value must be drawn highest";
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(points[i].y, points[lo].y + b * (values[i] - values[lo]), 0.02)
        << what << " point " << i;
}

void ExpectIncreasingX(const std::vector<Point>& points, const std::string& what) {
  for (size_t i = 1; i < points.size(); ++i)
    EXPECT_LT(points[i - 1].x, points[i].x) << what << " point " << i;
}

class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/plot_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // 20 train records with a loss that goes up and down, lr 0.1 / 0.01 / 0.001 (100x), test
  // records at 0, 10 and 19; returns the path.
  std::string WriteMetrics(const std::string& folder, double loss_offset = 0) {
    fs::create_directories(dir_ + "/" + folder);
    const std::string path = dir_ + "/" + folder + "/run_metrics.jsonl";
    std::ofstream out(path);
    for (int i = 0; i < 20; ++i) {
      if (i % 10 == 0 || i == 19)
        out << "{\"iter\": " << i << ", \"phase\": \"test\", \"net\": 0, \"time\": " << 0.5 * i
            << ", \"outputs\": {\"accuracy\": " << Accuracy(i) << ", \"loss\": " << Loss(i)
            << "}}\n";
      out << "{\"iter\": " << i << ", \"phase\": \"train\", \"time\": " << 0.5 * i + 0.1
          << ", \"lr\": " << Lr(i) << ", \"loss\": " << Loss(i) + loss_offset
          << ", \"smoothed_loss\": 1, \"outputs\": {\"loss\": " << Loss(i) << "}}\n";
    }
    return path;
  }
  static double Loss(int i) { return 2.0 / (1 + i) + 0.25 * std::sin(1.7 * i); }
  static double Lr(int i) { return i < 7 ? 0.1 : i < 14 ? 0.01 : 0.001; }
  static double Accuracy(int i) { return 0.3 + 0.03 * i; }

  std::string dir_;
};

TEST_F(PlotTest, SvgSeriesMapTheValues) {
  const std::string metrics = WriteMetrics("a");
  const std::string out = dir_ + "/curves.svg";
  const auto r = RunCrema("plot " + metrics + " --out " + out + " --smooth 3");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto lines = Polylines(out);
  ASSERT_EQ(lines.count("raw"), 1u) << ReadAll(out);

  std::vector<double> loss, average, log_lr, accuracy;
  for (int i = 0; i < 20; ++i) {
    loss.push_back(Loss(i));
    double sum = 0;
    int n = 0;
    for (int k = std::max(0, i - 2); k <= i; ++k, ++n) sum += Loss(k);
    average.push_back(sum / n);
    log_lr.push_back(std::log10(Lr(i)));
  }
  for (int i : {0, 10, 19}) accuracy.push_back(Accuracy(i));
  ExpectLinear(lines.at("raw"), loss, "raw loss");
  ExpectLinear(lines.at("smoothed"), average, "moving average of 3");
  ExpectLinear(lines.at("lr"), log_lr, "lr on a log axis");  // 100x range: log scale
  ExpectLinear(lines.at("test: accuracy"), accuracy, "test accuracy");
  ASSERT_EQ(lines.count("test: loss"), 1u);
  EXPECT_EQ(lines.at("test: loss").size(), 3u);
  ExpectIncreasingX(lines.at("raw"), "raw loss");
  // Iterations share one x axis: test point k sits at the x of train record 10k.
  EXPECT_NEAR(lines.at("test: accuracy")[1].x, lines.at("raw")[10].x, 0.02);

  const std::string svg = ReadAll(out);
  EXPECT_NE(svg.find(">learning rate (log scale)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">test: accuracy</text>"), std::string::npos);
  EXPECT_NE(svg.find(">average of 3</text>"), std::string::npos);  // the legend
  EXPECT_NE(svg.find(">iteration</text>"), std::string::npos);     // the axis label
}

TEST_F(PlotTest, SecondsAxisAndOverlaidRuns) {
  const std::string a = WriteMetrics("lr_0.1");
  const std::string b = WriteMetrics("lr_0.2", 1.0);
  const std::string out = dir_ + "/curves.svg";
  const auto r = RunCrema("plot " + a + " " + b + " --out " + out + " --x seconds");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto lines = Polylines(out);
  // Runs are named by their folders; the two share the loss axis, b's losses 1 higher.
  ASSERT_EQ(lines.count("lr_0.1/raw"), 1u) << ReadAll(out);
  ASSERT_EQ(lines.count("lr_0.2/raw"), 1u);
  std::vector<double> both;
  std::vector<Point> points = lines.at("lr_0.1/raw");
  for (int i = 0; i < 20; ++i) both.push_back(Loss(i));
  for (int i = 0; i < 20; ++i) both.push_back(Loss(i) + 1);
  for (const Point& p : lines.at("lr_0.2/raw")) points.push_back(p);
  ExpectLinear(points, both, "two runs' raw losses");
  // x is the time: train record i at 0.5 i + 0.1, test record at 0.5 i.
  std::vector<Point> by_time;
  for (const Point& p : lines.at("lr_0.1/raw")) by_time.push_back({p.y, p.x});
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) times.push_back(-(0.5 * i + 0.1));  // ExpectLinear wants b < 0
  ExpectLinear(by_time, times, "x = seconds");
  ASSERT_EQ(lines.count("lr_0.2/test: accuracy"), 1u);
  EXPECT_EQ(lines.at("lr_0.2/test: accuracy").size(), 3u);
  EXPECT_NE(ReadAll(out).find(">seconds</text>"), std::string::npos);
}

TEST_F(PlotTest, PlotsARealTrainingRun) {
  for (const char* type : {"DummyData", "InnerProduct", "EuclideanLoss"})
    if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
  const std::string net = dir_ + "/net.prototxt", solver = dir_ + "/solver.prototxt";
  std::ofstream(net) << testing::RegressionNet();
  std::ofstream(solver) << testing::RegressionSolver("net: \"" + net + "\"", dir_ + "/snap/reg");
  auto r = RunCrema("train --solver " + solver + " --set test_interval=5");
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string out = dir_ + "/curves.svg";
  r = RunCrema("plot " + dir_ + "/snap/reg_metrics.jsonl --out " + out + " --smooth 1");
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto lines = Polylines(out);
  // Train records at iterations 0..9 with loss (w_k - 2)^2 / 2, decreasing: drawn lower each
  // step; tests at 0, 5 and 10.
  std::vector<double> loss;
  for (int k = 0; k < 10; ++k) loss.push_back(RegressionLoss(0.1, k));
  ASSERT_EQ(lines.count("raw"), 1u) << ReadAll(out);
  ExpectLinear(lines.at("raw"), loss, "trained loss");
  ASSERT_EQ(lines.count("test: loss"), 1u);
  ExpectLinear(lines.at("test: loss"),
               {RegressionLoss(0.1, 0), RegressionLoss(0.1, 5), RegressionLoss(0.1, 10)},
               "test loss");
  // lr is fixed: one flat line on a linear axis.
  ASSERT_EQ(lines.at("lr").size(), 10u);
  for (const Point& p : lines.at("lr")) EXPECT_NEAR(p.y, lines.at("lr")[0].y, 1e-9);
  EXPECT_EQ(ReadAll(out).find("log scale"), std::string::npos);
}

TEST_F(PlotTest, PngHasTheLayoutsSizeAndIsNotBlank) {
#ifndef CREMA_WITH_OPENCV
  GTEST_SKIP() << "crema built without OpenCV: no PNG output";
#else
  const std::string metrics = WriteMetrics("a");
  const std::string png = dir_ + "/curves.png", svg = dir_ + "/curves.svg";
  auto r = RunCrema("plot " + metrics + " --out " + png);
  ASSERT_EQ(r.rc, 0) << r.output;
  r = RunCrema("plot " + metrics + " --out " + svg);
  ASSERT_EQ(r.rc, 0) << r.output;
  const cv::Mat image = cv::imread(png, cv::IMREAD_COLOR);
  ASSERT_FALSE(image.empty()) << "not a decodable PNG";
  // Same size as the SVG: 4 panels (loss, lr, test accuracy, test loss).
  std::smatch m;
  const std::string text = ReadAll(svg);
  ASSERT_TRUE(
      std::regex_search(text, m, std::regex("<svg [^>]*width=\"(\\d+)\" height=\"(\\d+)\"")));
  EXPECT_EQ(image.cols, std::stoi(m[1]));
  EXPECT_EQ(image.rows, std::stoi(m[2]));
  EXPECT_EQ(image.rows % 4, 0);
  // Not blank: white background, black axes and text, and the first palette colour (blue,
  // BGR 180,119,31) of the curves.
  int white = 0, dark = 0, blue = 0;
  for (int y = 0; y < image.rows; ++y)
    for (int x = 0; x < image.cols; ++x) {
      const cv::Vec3b p = image.at<cv::Vec3b>(y, x);
      if (p[0] == 255 && p[1] == 255 && p[2] == 255) ++white;
      if (p[0] < 60 && p[1] < 60 && p[2] < 60) ++dark;
      if (p[0] > 150 && p[2] < 80 && p[1] > 90 && p[1] < 150) ++blue;
    }
  const int total = image.rows * image.cols;
  EXPECT_GT(white, total / 2);
  EXPECT_GT(dark, 1000);
  EXPECT_GT(blue, 300);
#endif
}

TEST_F(PlotTest, BadInputIsAnErrorAndWritesNothing) {
  const std::string out = dir_ + "/curves.svg";
  auto expect_error = [&](const std::string& args, int rc, const std::string& message) {
    const auto r = RunCrema("plot " + args);
    EXPECT_EQ(r.rc, rc) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(out)) << args;
    for (const auto& entry : fs::directory_iterator(dir_))
      EXPECT_TRUE(entry.is_directory() || entry.path().extension() == ".jsonl")
          << "left behind: " << entry.path();
  };
  expect_error(dir_ + "/missing.jsonl --out " + out, 1, "cannot read " + dir_ + "/missing.jsonl");

  const std::string bad = dir_ + "/bad.jsonl";
  std::ofstream(bad) << "{\"iter\": 0, \"phase\": \"train\", \"lr\": 0.1, \"loss\": 1}\n\n"
                        "{\"iter\": 1, \"phase\": \"train\", \"lr\": 0.1, \"loss\": 1,}\n";
  expect_error(bad + " --out " + out, 2, bad + ":3:");
  std::ofstream(bad) << "{\"iter\": 0, \"phase\": \"train\", \"lr\": 0.1}\n";
  expect_error(bad + " --out " + out, 2, bad + ":1: the record has no \"loss\"");
  std::ofstream(bad) << "{\"iter\": 0, \"phase\": \"train\", \"lr\": 0.1, \"loss\": 1}\n"
                        "[1, 2]\n";
  expect_error(bad + " --out " + out, 2, bad + ":2: not a JSON metrics record");
  // A bad \u escape in a name: a located error, not "error: stoul" (exit 1).
  std::ofstream(bad) << "{\"iter\": 0, \"phase\": \"train\", \"lr\": 0.1, \"loss\": 1}\n"
                        "{\"iter\": 0, \"phase\": \"test\", \"outputs\": {\"a\\uZZZZ\": 1}}\n";
  expect_error(bad + " --out " + out, 2,
               bad + ":2:46: not a JSON metrics record: a \\u escape needs four hex digits");

  const std::string empty = dir_ + "/empty.jsonl";
  std::ofstream(empty) << "\n";
  expect_error(empty + " --out " + out, 2, empty + ": no train or test records");

  const std::string good = WriteMetrics("a");
  expect_error(good + " --out " + dir_ + "/curves.jpg", 2, "must end in .svg or .png");
  expect_error(good + " --out " + out + " --x epoch", 2, "--x must be iteration or seconds");
  expect_error(good + " --out " + out + " --x seconds " + bad, 2, bad + ":1:");
  expect_error(good, 2, "--out is required");
}

TEST_F(PlotTest, IncompleteLastLineIsSkipped) {
  // A run still writing (or killed while writing) leaves a last line without its newline.
  const std::string metrics = WriteMetrics("a");
  std::ofstream(metrics, std::ios::app) << "{\"iter\": 20, \"phase\": \"tr";
  const std::string out = dir_ + "/curves.svg";
  const auto r = RunCrema("plot " + metrics + " --out " + out);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find(metrics + ":24: skipped an incomplete last line"), std::string::npos)
      << r.output;
  EXPECT_EQ(Polylines(out).at("raw").size(), 20u);
}

}  // namespace
}  // namespace crema
