#pragma once
// Progress of the convert-* verbs over `total` items. Live (--progress on, or auto with stdout a
// terminal): one line redrawn in place at most ten times a second,
//   [=====>      ] 1200/5000 images  850 images/s  ETA 4s
// with messages printed above it. Otherwise (a pipe or a file, as in scripts and logs) it draws
// nothing, and the verbs print their periodic plain lines as before (when !live()).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "solvers/progress_line.hpp"

namespace crema::cli {

class ConvertProgress {
 public:
  ConvertProgress(int64_t total, std::string unit);
  bool live() const { return line_ != nullptr; }
  // `done` items finished.
  void Update(int64_t done);
  // `text` and a newline on `stream` (stdout or stderr), above the live line when it shares the
  // terminal.
  void Message(const std::string& text, std::FILE* stream = stdout);
  // Draws the final count and moves below it.
  void Finish();

 private:
  void Draw(bool force);

  int64_t total_, done_ = 0;
  std::string unit_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<ProgressLine> line_;
};

}  // namespace crema::cli
