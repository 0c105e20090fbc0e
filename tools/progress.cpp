#include "progress.hpp"

#include <unistd.h>

#include <utility>

#include "flags.hpp"

namespace crema::cli {

ConvertProgress::ConvertProgress(int64_t total, std::string unit)
    : total_(total), unit_(std::move(unit)), start_(std::chrono::steady_clock::now()) {
  if (LiveProgress()) line_ = std::make_unique<ProgressLine>(stdout);
}

void ConvertProgress::Update(int64_t done) {
  done_ = done;
  if (line_) Draw(done == total_);
}

void ConvertProgress::Draw(bool force) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // No rate (nor ETA) over the first moments, when it would mean little.
  const double rate = seconds > 0.2 ? static_cast<double>(done_) / seconds : 0;
  line_->Show(ProgressLine::FormatCount(done_, total_, unit_, rate, 24), force);
}

void ConvertProgress::Message(const std::string& text, std::FILE* stream) {
  if (line_ && (stream == stdout || isatty(fileno(stream)))) {
    line_->Message(text);
    return;
  }
  std::fprintf(stream, "%s\n", text.c_str());
  std::fflush(stream);
}

void ConvertProgress::Finish() {
  if (!line_) return;
  if (done_ != total_) Draw(true);  // Update(total) drew the full count already
  line_->Finish();
}

}  // namespace crema::cli
