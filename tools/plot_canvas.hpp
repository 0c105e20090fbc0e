#pragma once
// crema plot, drawing surfaces: one Canvas interface with an SVG writer (by hand) and, when crema
// is built with OpenCV, a PNG painter, so both formats get the same layout.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crema::cli {

struct Color {
  int r, g, b;
  // Mixed with white: `alpha` of this colour (faint lines look the same in SVG and PNG).
  Color Faint(double alpha) const {
    auto mix = [&](int c) { return static_cast<int>(std::lround(c * alpha + 255 * (1 - alpha))); };
    return {mix(r), mix(g), mix(b)};
  }
};
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

// An SVG canvas, or (`png`, OpenCV builds only) a PNG one, of width x height pixels.
std::unique_ptr<Canvas> MakeCanvas(bool png, int width, int height);

}  // namespace crema::cli
