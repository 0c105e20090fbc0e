#pragma once
// A live one-line training status for a terminal, redrawn in place at most ten times a second:
//   [=====>      ] iter 1200/10000  loss 0.4121  lr 0.00904  37.5 it/s  ETA 3m54s
// Lines printed through Message() appear above it. The solver uses it when
// SolverOptions::progress is set (the CLI sets it when stdout is a terminal).
#include <chrono>
#include <cstdio>
#include <string>

namespace crema {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out = stdout) : out_(out) {}
  ~ProgressLine() { Finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // The state after `iter` of `max_iter` iterations; `iters_per_second` <= 0 when unknown.
  void Update(int iter, int max_iter, double smoothed_loss, double lr, double iters_per_second,
              bool force = false);
  // Any other job: a bar `fraction` full followed by `text` (e.g. crema classify's images).
  void Show(double fraction, const std::string& text, bool force = false);
  // Prints `text` on its own line above the progress line.
  void Message(const std::string& text);
  // Leaves the last progress line on screen and moves below it.
  void Finish();

  // The line for a state (no terminal codes), e.g. for tests.
  static std::string Format(int iter, int max_iter, double smoothed_loss, double lr,
                            double iters_per_second, int width);
  // "[=====>      ]" for `fraction` in [0, 1].
  static std::string Bar(double fraction, int width);

 private:
  void Clear();
  void Draw(const std::string& line);
  std::FILE* out_;
  std::string line_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace crema
