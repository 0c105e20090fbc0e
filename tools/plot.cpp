// crema plot: draws the curves of one or more <snapshot_prefix>_metrics.jsonl files (written by
// `crema train`, see src/solvers/training_log.hpp) into an SVG or PNG: panels stacked top to
// bottom sharing the x axis (iteration or seconds): the training loss (raw, faint, and a trailing
// moving average), the learning rate (log scale when it spans more than 10x), then one panel per
// test output. Several files are overlaid, one colour each, labelled by their folder (or name).
// The SVG is written by hand; the PNG is drawn with OpenCV. Both go through one Canvas, so they
// have the same layout.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "flags.hpp"
#include "io/json.hpp"
#include "net/proto_io.hpp"
#include "verb.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

DEFINE_string(x, "iteration", "The x axis of every panel: iteration or seconds (since the start).");
DEFINE_int32(smooth, 0,
             "The window (in train records) of the moving average drawn over the raw loss; "
             "0 picks about 1/50 of the records, 1 draws no average.");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

// ---- the metrics of one run ----

struct Series {
  std::vector<double> x, y;
  void Add(double xv, double yv) {
    if (!std::isfinite(xv) || !std::isfinite(yv)) return;  // null (NaN/inf) values are gaps
    x.push_back(xv);
    y.push_back(yv);
  }
};

struct Run {
  std::string path, label;
  Series loss, lr;
  std::vector<std::pair<std::string, Series>> tests;  // panel title -> values, in file order
};

double NumberField(const Json& record, const char* key, const std::string& where, bool required) {
  const Json* value = record.Find(key);
  if (value == nullptr) {
    if (required) CREMA_THROW_CONFIG(where, ": the record has no \"", key, "\"");
    return NAN;
  }
  if (value->type == Json::Type::kNull) return NAN;
  if (value->type != Json::Type::kNumber)
    CREMA_THROW_CONFIG(where, ": \"", key, "\" must be a number");
  return value->number;
}

Series* TestSeries(Run* run, const std::string& title) {
  for (auto& [name, series] : run->tests)
    if (name == title) return &series;
  run->tests.emplace_back(title, Series());
  return &run->tests.back().second;
}

Run ReadMetrics(const std::string& path, bool x_seconds) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) CREMA_THROW_RUNTIME("cannot read ", path);
  Run run;
  run.path = path;
  std::string line;
  int line_number = 0, records = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const bool last_unterminated = in.eof();  // no newline after it: perhaps still being written
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = StrCat(path, ":", line_number);
    Json record;
    try {
      record = ParseJson(line);
    } catch (const JsonSyntaxError& e) {
      if (last_unterminated) {
        LOG(WARNING) << where << ": skipped an incomplete last line (the run is writing it, or "
                     << "was stopped while writing it)";
        break;
      }
      CREMA_THROW_CONFIG(where, ":", e.offset() + 1, ": not a JSON metrics record: ", e.message());
    }
    if (!record.is_object())
      CREMA_THROW_CONFIG(where, ": not a JSON metrics record: expected an object");
    const Json* phase = record.Find("phase");
    if (phase == nullptr || phase->type != Json::Type::kString)
      CREMA_THROW_CONFIG(where, ": the record has no \"phase\" string");
    if (phase->string != "train" && phase->string != "test") continue;  // other kinds: not plotted
    const double iter = NumberField(record, "iter", where, true);
    const double x = x_seconds ? NumberField(record, "time", where, true) : iter;
    if (!std::isfinite(x))
      CREMA_THROW_CONFIG(where, ": \"", x_seconds ? "time" : "iter", "\" must be a number");
    ++records;
    if (phase->string == "train") {
      run.loss.Add(x, NumberField(record, "loss", where, true));
      run.lr.Add(x, NumberField(record, "lr", where, false));
      continue;
    }
    const double net = NumberField(record, "net", where, false);
    const Json* outputs = record.Find("outputs");
    if (outputs == nullptr || !outputs->is_object())
      CREMA_THROW_CONFIG(where, ": a test record needs an \"outputs\" object");
    const std::string prefix = std::isfinite(net) && net != 0
                                   ? StrCat("test net #", static_cast<int>(net), ": ")
                                   : "test: ";
    for (const auto& [name, value] : outputs->object) {
      if (value.type != Json::Type::kNumber && value.type != Json::Type::kNull)
        CREMA_THROW_CONFIG(where, ": outputs.", name, " must be a number");
      TestSeries(&run, prefix + name)->Add(x, value.type == Json::Type::kNull ? NAN : value.number);
    }
  }
  if (records == 0) CREMA_THROW_CONFIG(path, ": no train or test records");
  return run;
}

// The legend names of the runs: their folders when those tell them apart, else their file
// names without _metrics.jsonl, else their paths.
void LabelRuns(std::vector<Run>* runs) {
  auto distinct = [&](auto name_of) {
    std::vector<std::string> names;
    for (const Run& run : *runs) names.push_back(name_of(run));
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;
    if (std::find(names.begin(), names.end(), "") != names.end()) return false;
    for (size_t i = 0; i < runs->size(); ++i) (*runs)[i].label = names[i];
    return true;
  };
  const auto folder = [](const Run& run) {
    return fs::absolute(run.path).lexically_normal().parent_path().filename().string();
  };
  const auto stem = [](const Run& run) {
    std::string name = fs::path(run.path).filename().string();
    for (const std::string suffix : {"_metrics.jsonl", ".jsonl"})
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return name.substr(0, name.size() - suffix.size());
    return name;
  };
  if (runs->size() == 1 || distinct(folder) || distinct(stem)) {
    if (runs->size() == 1) (*runs)[0].label = stem((*runs)[0]);
    return;
  }
  for (Run& run : *runs) run.label = run.path;
}

// The trailing moving average of `window` points (fewer at the start).
Series MovingAverage(const Series& raw, int window) {
  Series out;
  double sum = 0;
  for (size_t i = 0; i < raw.y.size(); ++i) {
    sum += raw.y[i];
    if (i >= static_cast<size_t>(window)) sum -= raw.y[i - window];
    out.x.push_back(raw.x[i]);
    out.y.push_back(sum / static_cast<double>(std::min<size_t>(i + 1, window)));
  }
  return out;
}

// ---- drawing ----

struct Color {
  int r, g, b;
  // Mixed with white: `alpha` of this colour (faint lines look the same in SVG and PNG).
  Color Faint(double alpha) const {
    auto mix = [&](int c) { return static_cast<int>(std::lround(c * alpha + 255 * (1 - alpha))); };
    return {mix(r), mix(g), mix(b)};
  }
};
constexpr Color kBlack{0, 0, 0}, kGrid{225, 225, 225}, kFrame{170, 170, 170}, kWhite{255, 255, 255};
constexpr Color kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                              {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                              {188, 189, 34},  {23, 190, 207}};

enum class Anchor { kStart, kMiddle, kEnd };

using Points = std::vector<std::pair<double, double>>;

class Canvas {
 public:
  virtual ~Canvas() = default;
  virtual void Line(double x1, double y1, double x2, double y2, Color color, double width) = 0;
  // `id` names the series in the SVG (data-series), for tools and tests.
  virtual void Polyline(const Points& points, Color color, double width, const std::string& id) = 0;
  virtual void Dot(double x, double y, double radius, Color color) = 0;
  virtual void Box(double x, double y, double w, double h, Color stroke, Color fill) = 0;
  virtual void Text(double x, double y, const std::string& text, double size, Anchor anchor,
                    Color color) = 0;
  virtual std::string Encode() = 0;  // the file's bytes
};

std::string Hex(Color c) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "#%02x%02x%02x", c.r, c.g, c.b);
  return buffer;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f", v);
  return buffer;
}

class SvgCanvas final : public Canvas {
 public:
  SvgCanvas(int width, int height) : width_(width), height_(height) {}
  void Line(double x1, double y1, double x2, double y2, Color color, double width) override {
    body_ += StrCat("<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2), "\" y2=\"",
                    Num(y2), "\" stroke=\"", Hex(color), "\" stroke-width=\"", width, "\"/>\n");
  }
  void Polyline(const Points& points, Color color, double width, const std::string& id) override {
    body_ +=
        StrCat("<polyline data-series=\"", XmlEscape(id), "\" fill=\"none\" stroke=\"", Hex(color),
               "\" stroke-width=\"", width, "\" stroke-linejoin=\"round\" points=\"");
    for (size_t i = 0; i < points.size(); ++i)
      body_ += StrCat(i ? " " : "", Num(points[i].first), ",", Num(points[i].second));
    body_ += "\"/>\n";
  }
  void Dot(double x, double y, double radius, Color color) override {
    body_ += StrCat("<circle cx=\"", Num(x), "\" cy=\"", Num(y), "\" r=\"", radius, "\" fill=\"",
                    Hex(color), "\"/>\n");
  }
  void Box(double x, double y, double w, double h, Color stroke, Color fill) override {
    body_ += StrCat("<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(w), "\" height=\"",
                    Num(h), "\" fill=\"", Hex(fill), "\" stroke=\"", Hex(stroke), "\"/>\n");
  }
  void Text(double x, double y, const std::string& text, double size, Anchor anchor,
            Color color) override {
    const char* where = anchor == Anchor::kStart    ? "start"
                        : anchor == Anchor::kMiddle ? "middle"
                                                    : "end";
    body_ += StrCat("<text x=\"", Num(x), "\" y=\"", Num(y), "\" font-size=\"", size,
                    "\" text-anchor=\"", where, "\" fill=\"", Hex(color), "\">", XmlEscape(text),
                    "</text>\n");
  }
  std::string Encode() override {
    return StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width_, "\" height=\"",
                  height_, "\" viewBox=\"0 0 ", width_, " ", height_,
                  "\" font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" "
                  "height=\"100%\" fill=\"#ffffff\"/>\n",
                  body_, "</svg>\n");
  }

 private:
  int width_, height_;
  std::string body_;
};

#ifdef CREMA_WITH_OPENCV
class PngCanvas final : public Canvas {
 public:
  PngCanvas(int width, int height) : image_(height, width, CV_8UC3, cv::Scalar(255, 255, 255)) {}
  void Line(double x1, double y1, double x2, double y2, Color color, double width) override {
    cv::line(image_, P(x1, y1), P(x2, y2), Bgr(color), Thickness(width), cv::LINE_AA, kShift);
  }
  void Polyline(const Points& points, Color color, double width, const std::string&) override {
    std::vector<cv::Point> pts;
    for (const auto& [x, y] : points) pts.push_back(P(x, y));
    if (pts.size() == 1) pts.push_back(pts[0]);
    cv::polylines(image_, pts, false, Bgr(color), Thickness(width), cv::LINE_AA, kShift);
  }
  void Dot(double x, double y, double radius, Color color) override {
    cv::circle(image_, P(x, y), static_cast<int>(std::lround(radius * (1 << kShift))), Bgr(color),
               cv::FILLED, cv::LINE_AA, kShift);
  }
  void Box(double x, double y, double w, double h, Color stroke, Color fill) override {
    cv::rectangle(image_, P(x, y), P(x + w, y + h), Bgr(fill), cv::FILLED, cv::LINE_8, kShift);
    cv::rectangle(image_, P(x, y), P(x + w, y + h), Bgr(stroke), 1, cv::LINE_8, kShift);
  }
  void Text(double x, double y, const std::string& text, double size, Anchor anchor,
            Color color) override {
    // Hershey Simplex capitals are about 22 px tall at scale 1; SVG's font-size is the em.
    const double scale = size / 30.0;
    int baseline = 0;
    const cv::Size extent = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline);
    double left = x;
    if (anchor == Anchor::kMiddle) left -= extent.width / 2.0;
    if (anchor == Anchor::kEnd) left -= extent.width;
    cv::putText(image_, text,
                cv::Point(static_cast<int>(std::lround(left)), static_cast<int>(std::lround(y))),
                cv::FONT_HERSHEY_SIMPLEX, scale, Bgr(color), 1, cv::LINE_AA);
  }
  std::string Encode() override {
    std::vector<unsigned char> bytes;
    if (!cv::imencode(".png", image_, bytes)) CREMA_THROW_RUNTIME("PNG encoding failed");
    return std::string(bytes.begin(), bytes.end());
  }

 private:
  static constexpr int kShift = 4;  // sub-pixel coordinates: 1/16 pixel
  static cv::Point P(double x, double y) {
    return {static_cast<int>(std::lround(x * (1 << kShift))),
            static_cast<int>(std::lround(y * (1 << kShift)))};
  }
  static cv::Scalar Bgr(Color c) { return cv::Scalar(c.b, c.g, c.r); }
  static int Thickness(double width) { return std::max(1, static_cast<int>(std::lround(width))); }
  cv::Mat image_;
};
#endif

// A y (or x) axis: linear, or log10 when `log`.
struct Scale {
  double lo = 0, hi = 1;
  bool log = false;
  double Map(double v, double a, double b) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return a + t * (b - a);
  }
};

// Ticks at 1, 2 or 5 times a power of ten, about `target` of them; powers of ten on a log axis
// (with 2x and 5x in between when the range holds fewer than three).
std::vector<double> Ticks(const Scale& scale, int target) {
  std::vector<double> ticks;
  if (scale.log) {
    const int first = static_cast<int>(std::floor(std::log10(scale.lo)));
    const int last = static_cast<int>(std::ceil(std::log10(scale.hi)));
    const bool fine = last - first < 3;
    for (int e = first; e <= last; ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if ((m == 1.0 || fine) && v >= scale.lo * (1 - 1e-9) && v <= scale.hi * (1 + 1e-9))
          ticks.push_back(v);
      }
    return ticks;
  }
  const double raw = (scale.hi - scale.lo) / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {2.0, 5.0, 10.0})
    if (step < raw) step = m * power;
  for (double v = std::ceil(scale.lo / step - 1e-9) * step; v <= scale.hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

std::string TickLabel(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

// One line of a panel: its points, colour and width, markers for sparse series.
struct Curve {
  Series series;
  Color color;
  double width;
  bool dots;
  std::string id;
};

struct Panel {
  std::string title;
  bool log_y = false;
  std::vector<Curve> curves;
  std::vector<std::pair<std::string, Color>> legend;
};

// The range of the curves' values, padded by 5% (log axes: multiplied by 10^0.05).
Scale YScale(const Panel& panel) {
  Scale scale;
  scale.log = panel.log_y;
  double lo = INFINITY, hi = -INFINITY;
  for (const Curve& curve : panel.curves)
    for (double v : curve.series.y) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (!(lo <= hi)) lo = 0, hi = 1;  // no values at all
  if (scale.log) {
    const double pad = std::pow(hi / lo, 0.05);
    scale.lo = lo / pad;
    scale.hi = hi * pad;
    return scale;
  }
  if (lo == hi) {
    const double half = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= half;
    hi += half;
  }
  const double pad = (hi - lo) * 0.05;
  scale.lo = lo - pad;
  scale.hi = hi + pad;
  return scale;
}

constexpr int kWidth = 960, kPanelHeight = 260, kLeft = 84, kRight = 28, kTop = 34, kBottom = 42;
constexpr double kFont = 13;

void DrawPanel(Canvas* canvas, const Panel& panel, const Scale& x_scale, double top,
               const std::string& x_label) {
  const double left = kLeft, right = kWidth - kRight;
  const double plot_top = top + kTop, plot_bottom = top + kPanelHeight - kBottom;
  const Scale y_scale = YScale(panel);
  auto px = [&](double x) { return x_scale.Map(x, left, right); };
  auto py = [&](double y) { return y_scale.Map(y, plot_bottom, plot_top); };

  canvas->Text((left + right) / 2, top + 22, panel.title, kFont + 2, Anchor::kMiddle, kBlack);
  for (double t : Ticks(y_scale, 5)) {
    canvas->Line(left, py(t), right, py(t), kGrid, 1);
    canvas->Line(left - 5, py(t), left, py(t), kBlack, 1);
    canvas->Text(left - 8, py(t) + 4, TickLabel(t), kFont - 2, Anchor::kEnd, kBlack);
  }
  for (double t : Ticks(x_scale, 8)) {
    canvas->Line(px(t), plot_top, px(t), plot_bottom, kGrid, 1);
    canvas->Line(px(t), plot_bottom, px(t), plot_bottom + 5, kBlack, 1);
    canvas->Text(px(t), plot_bottom + 18, TickLabel(t), kFont - 2, Anchor::kMiddle, kBlack);
  }
  canvas->Text(right, plot_bottom + 34, x_label, kFont - 1, Anchor::kEnd, kBlack);
  canvas->Line(left, plot_top, left, plot_bottom, kBlack, 1);
  canvas->Line(left, plot_bottom, right, plot_bottom, kBlack, 1);

  for (const Curve& curve : panel.curves) {
    Points points;
    for (size_t i = 0; i < curve.series.x.size(); ++i)
      points.emplace_back(px(curve.series.x[i]), py(curve.series.y[i]));
    if (points.empty()) continue;
    canvas->Polyline(points, curve.color, curve.width, curve.id);
    if (curve.dots || points.size() == 1)
      for (const auto& [x, y] : points) canvas->Dot(x, y, 2.5, curve.color);
  }

  // The legend: top right inside the plot area.
  size_t longest = 0;
  for (const auto& entry : panel.legend) longest = std::max(longest, entry.first.size());
  const double row = 17, box_w = 38 + 7.0 * static_cast<double>(longest);
  const double box_h = 8 + row * static_cast<double>(panel.legend.size());
  const double box_x = right - box_w - 8, box_y = plot_top + 8;
  if (panel.legend.empty()) return;
  canvas->Box(box_x, box_y, box_w, box_h, kFrame, kWhite);
  for (size_t i = 0; i < panel.legend.size(); ++i) {
    const double y = box_y + 4 + row * (static_cast<double>(i) + 0.5);
    canvas->Line(box_x + 6, y, box_x + 26, y, panel.legend[i].second, 2.5);
    canvas->Text(box_x + 32, y + 4, panel.legend[i].first, kFont - 2, Anchor::kStart, kBlack);
  }
}

std::vector<Panel> BuildPanels(const std::vector<Run>& runs, int smooth) {
  const bool several = runs.size() > 1;
  Panel loss{"training loss (faint: raw; bold: moving average)", false, {}, {}};
  Panel lr{"learning rate", false, {}, {}};
  std::vector<Panel> tests;
  double lr_lo = INFINITY, lr_hi = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    const Color color = kPalette[r % std::size(kPalette)];
    const std::string tag = several ? run.label + "/" : "";
    const int window =
        smooth > 0 ? smooth : std::max(1, static_cast<int>(std::lround(run.loss.y.size() / 50.0)));
    loss.curves.push_back({run.loss, color.Faint(several ? 0.25 : 0.35), 1, false, tag + "raw"});
    loss.curves.push_back({MovingAverage(run.loss, window), color, 2, false, tag + "smoothed"});
    if (several) {
      loss.legend.emplace_back(StrCat(run.label, " (", window, ")"), color);
    } else {
      loss.legend.emplace_back("raw", color.Faint(0.35));
      loss.legend.emplace_back(StrCat("average of ", window), color);
    }
    lr.curves.push_back({run.lr, color, 1.5, false, tag + "lr"});
    lr.legend.emplace_back(several ? run.label : "lr", color);
    for (double v : run.lr.y) {
      if (v > 0) lr_lo = std::min(lr_lo, v);
      lr_hi = std::max(lr_hi, v);
    }
    for (const auto& [title, series] : run.tests) {
      // A structured binding can't be captured before C++20 (clang rejects it).
      const std::string& name = title;
      auto it =
          std::find_if(tests.begin(), tests.end(), [&](const Panel& p) { return p.title == name; });
      if (it == tests.end()) it = tests.insert(tests.end(), Panel{title, false, {}, {}});
      it->curves.push_back({series, color, 1.5, true, tag + title});
      it->legend.emplace_back(several ? run.label : title.substr(title.find(": ") + 2), color);
    }
  }
  // Log scale only when every lr is positive (a log axis cannot show 0).
  bool positive = true;
  for (const Run& run : runs)
    for (double v : run.lr.y) positive = positive && v > 0;
  lr.log_y = positive && lr_hi > 10 * lr_lo;
  if (lr.log_y) lr.title += " (log scale)";
  std::vector<Panel> panels;
  if (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return !r.loss.y.empty(); }))
    panels.push_back(std::move(loss));
  if (std::any_of(runs.begin(), runs.end(), [](const Run& r) { return !r.lr.y.empty(); }))
    panels.push_back(std::move(lr));
  for (Panel& p : tests) panels.push_back(std::move(p));
  return panels;
}

int RunPlot(const std::vector<std::string>& args) {
  if (args.empty())
    CREMA_THROW_CONFIG("give one or more metrics files (<snapshot_prefix>_metrics.jsonl)");
  RequireFlag("out", FLAGS_out);
  const std::string extension = fs::path(FLAGS_out).extension().string();
  std::string lower = extension;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower != ".svg" && lower != ".png")
    CREMA_THROW_CONFIG("--out ", FLAGS_out, ": the file name must end in .svg or .png, got \"",
                       extension, "\"");
#ifndef CREMA_WITH_OPENCV
  if (lower == ".png")
    CREMA_THROW_CONFIG("--out ", FLAGS_out,
                       ": PNG needs crema built with OpenCV (it was not found); use .svg");
#endif
  if (FLAGS_x != "iteration" && FLAGS_x != "seconds")
    CREMA_THROW_CONFIG("--x must be iteration or seconds, got \"", FLAGS_x, "\"");
  if (FLAGS_smooth < 0) CREMA_THROW_CONFIG("--smooth must be >= 0, got ", FLAGS_smooth);

  std::vector<Run> runs;
  for (const std::string& path : args) runs.push_back(ReadMetrics(path, FLAGS_x == "seconds"));
  LabelRuns(&runs);
  const std::vector<Panel> panels = BuildPanels(runs, FLAGS_smooth);

  Scale x_scale;
  double lo = INFINITY, hi = -INFINITY;
  for (const Panel& panel : panels)
    for (const Curve& curve : panel.curves)
      for (double x : curve.series.x) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
  if (!(lo <= hi)) lo = 0, hi = 1;  // every value null
  if (lo == hi) hi = lo + 1;
  x_scale.lo = lo;
  x_scale.hi = hi;

  const int height = kPanelHeight * static_cast<int>(std::max<size_t>(panels.size(), 1));
  std::unique_ptr<Canvas> canvas;
#ifdef CREMA_WITH_OPENCV
  if (lower == ".png") canvas = std::make_unique<PngCanvas>(kWidth, height);
#endif
  if (!canvas) canvas = std::make_unique<SvgCanvas>(kWidth, height);
  for (size_t i = 0; i < panels.size(); ++i)
    DrawPanel(canvas.get(), panels[i], x_scale, static_cast<double>(i) * kPanelHeight, FLAGS_x);
  // Written to a temporary name and renamed: a failed plot leaves no partial file.
  WriteFileAtomically(FLAGS_out, canvas->Encode());
  std::printf("%s: %zu panel(s), %zu run(s)\n", FLAGS_out.c_str(), panels.size(), runs.size());
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    plot, "plot", "draw the training curves of metrics.jsonl files into an SVG or PNG",
    "crema plot METRICS.jsonl [METRICS.jsonl ...] --out curves.svg|curves.png [--x "
    "iteration|seconds] [--smooth N]\n\n"
    "Reads the <snapshot_prefix>_metrics.jsonl files `crema train` writes and draws, in panels "
    "stacked on one x axis (iteration, or seconds since the start with --x seconds): the "
    "training loss (raw, faint, and a trailing moving average over --smooth records), the "
    "learning rate (log scale when it spans more than 10x) and each test output (one panel per "
    "output and test net). Several files are overlaid, one colour each, named in the legends by "
    "their folder (as `crema sweep` lays its runs out) or else by their file name. The format "
    "follows --out's extension. A malformed line is an error naming FILE:LINE (exit 2); an "
    "incomplete last line (a run still writing) is skipped with a warning. Nothing is written "
    "on error.",
    {"out", "x", "smooth"}, &crema::cli::RunPlot);
