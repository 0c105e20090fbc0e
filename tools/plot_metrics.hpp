#pragma once
// crema plot, reading: the <snapshot_prefix>_metrics.jsonl files `crema train` writes
// (src/solvers/training_log.hpp) as series of (x, value) points per run.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace crema::cli {

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

// Reads one metrics file, x being the iteration or (x_seconds) the seconds since the start.
// ConfigError naming FILE:LINE(:COL) for a malformed record; an incomplete last line (a run
// still writing it) is skipped with a warning. RuntimeError when the file cannot be read.
Run ReadMetrics(const std::string& path, bool x_seconds);
// The legend names of the runs: their folders when those tell them apart, else their file
// names without _metrics.jsonl, else their paths.
void LabelRuns(std::vector<Run>* runs);
// The trailing moving average of `window` points (fewer at the start).
Series MovingAverage(const Series& raw, int window);

}  // namespace crema::cli
