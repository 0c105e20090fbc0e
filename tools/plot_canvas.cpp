#include "plot_canvas.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "crema/error.hpp"

#ifdef CREMA_WITH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace crema::cli {
namespace {

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

}  // namespace

std::unique_ptr<Canvas> MakeCanvas(bool png, int width, int height) {
#ifdef CREMA_WITH_OPENCV
  if (png) return std::make_unique<PngCanvas>(width, height);
#else
  CREMA_ASSERT(!png, "PNG canvas in a build without OpenCV");
#endif
  return std::make_unique<SvgCanvas>(width, height);
}

}  // namespace crema::cli
