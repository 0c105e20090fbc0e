#include "solvers/progress_line.hpp"

#include <algorithm>
#include <cmath>

namespace crema {
namespace {

constexpr std::chrono::milliseconds kRedraw(100);

// "[===>    ]": `width` cells, the filled ones for `fraction` of the work, an arrow at the front.
std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
         std::string(std::max(0, width - filled - 1), ' ') + "]";
}

}  // namespace

std::string ProgressLine::Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buffer[32];
  if (s >= 3600)
    std::snprintf(buffer, sizeof(buffer), "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buffer, sizeof(buffer), "%lds", s);
  return buffer;
}

std::string ProgressLine::Format(int iter, int max_iter, double smoothed_loss, double lr,
                                 double iters_per_second, int width) {
  const std::string bar = Bar(max_iter > 0 ? static_cast<double>(iter) / max_iter : 0.0, width);
  char text[160];
  std::snprintf(text, sizeof(text), " iter %d/%d  loss %.4g  lr %.3g", iter, max_iter,
                smoothed_loss, lr);
  std::string line = bar + text;
  if (iters_per_second > 0) {
    std::snprintf(text, sizeof(text), "  %.3g it/s  ETA %s", iters_per_second,
                  Duration((max_iter - iter) / iters_per_second).c_str());
    line += text;
  }
  return line;
}

std::string ProgressLine::FormatCount(int64_t done, int64_t total, const std::string& unit,
                                      double per_second, int width) {
  char text[160];
  std::snprintf(text, sizeof(text), " %lld/%lld %s", static_cast<long long>(done),
                static_cast<long long>(total), unit.c_str());
  std::string line = Bar(total > 0 ? static_cast<double>(done) / total : 0.0, width) + text;
  if (per_second > 0) {
    std::snprintf(text, sizeof(text), "  %.0f %s/s  ETA %s", per_second, unit.c_str(),
                  Duration(static_cast<double>(total - done) / per_second).c_str());
    line += text;
  }
  return line;
}

void ProgressLine::Clear() {
  if (shown_) std::fputs("\r\033[2K", out_);
  shown_ = false;
}

void ProgressLine::Update(int iter, int max_iter, double smoothed_loss, double lr,
                          double iters_per_second, bool force) {
  Show(Format(iter, max_iter, smoothed_loss, lr, iters_per_second, 24), force);
}

void ProgressLine::Show(const std::string& line, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && shown_ && now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  line_ = line;
  Clear();
  std::fputs(line_.c_str(), out_);
  std::fflush(out_);
  shown_ = true;
}

void ProgressLine::Message(const std::string& text) {
  const bool was_shown = shown_;
  Clear();
  std::fprintf(out_, "%s\n", text.c_str());
  if (was_shown) {
    std::fputs(line_.c_str(), out_);
    shown_ = true;
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (!shown_) return;
  std::fputs("\n", out_);
  std::fflush(out_);
  shown_ = false;
}

}  // namespace crema
