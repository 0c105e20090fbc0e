#include "plot_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <memory>

#include "crema/error.hpp"

namespace crema::cli {
namespace {

constexpr Color kBlack{0, 0, 0}, kGrid{225, 225, 225}, kFrame{170, 170, 170}, kWhite{255, 255, 255};
constexpr Color kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                              {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                              {188, 189, 34},  {23, 190, 207}};

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

}  // namespace

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

std::string DrawPanels(const std::vector<Panel>& panels, const std::string& x_label, bool png) {
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
  std::unique_ptr<Canvas> canvas = MakeCanvas(png, kWidth, height);
  for (size_t i = 0; i < panels.size(); ++i)
    DrawPanel(canvas.get(), panels[i], x_scale, static_cast<double>(i) * kPanelHeight, x_label);
  return canvas->Encode();
}

}  // namespace crema::cli
