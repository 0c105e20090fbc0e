#include "solvers/progress_line.hpp"

#include <algorithm>
#include <cmath>

namespace crema {
namespace {

constexpr std::chrono::milliseconds kRedrawInterval(100);

std::string Duration(double seconds) {
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

}  // namespace

std::string ProgressLine::Format(int iter, int max_iter, double smoothed_loss, double lr,
                                 double iters_per_second, int width) {
  std::string bar = Bar(max_iter > 0 ? static_cast<double>(iter) / max_iter : 0.0, width);
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

std::string ProgressLine::Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return "[" + std::string(filled, '=') + (filled < width ? ">" : "") +
         std::string(std::max(0, width - filled - 1), ' ') + "]";
}

void ProgressLine::Clear() {
  if (shown_) std::fputs("\r\033[2K", out_);
  shown_ = false;
}

void ProgressLine::Update(int iter, int max_iter, double smoothed_loss, double lr,
                          double iters_per_second, bool force) {
  if (!force && shown_ && std::chrono::steady_clock::now() - last_draw_ < kRedrawInterval) return;
  Draw(Format(iter, max_iter, smoothed_loss, lr, iters_per_second, 24));
}

void ProgressLine::Show(double fraction, const std::string& text, bool force) {
  if (!force && shown_ && std::chrono::steady_clock::now() - last_draw_ < kRedrawInterval) return;
  Draw(Bar(fraction, 24) + " " + text);
}

void ProgressLine::Draw(const std::string& line) {
  last_draw_ = std::chrono::steady_clock::now();
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
