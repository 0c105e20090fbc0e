// crema plot: draws the curves of one or more <snapshot_prefix>_metrics.jsonl files (written by
// `crema train`, see src/solvers/training_log.hpp) into an SVG or PNG: panels stacked top to
// bottom sharing the x axis (iteration or seconds). This file is the verb (flags, checks, the
// output file); plot_metrics reads the files, plot_chart lays out and draws the panels on a
// plot_canvas (SVG by hand, PNG with OpenCV: one layout for both).
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "plot_chart.hpp"
#include "verb.hpp"

DEFINE_string(x, "iteration", "The x axis of every panel: iteration or seconds (since the start).");
DEFINE_int32(smooth, 0,
             "The window (in train records) of the moving average drawn over the raw loss; "
             "0 picks about 1/50 of the records, 1 draws no average.");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

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

  // Written to a temporary name and renamed: a failed plot leaves no partial file.
  WriteFileAtomically(FLAGS_out, DrawPanels(panels, FLAGS_x, lower == ".png"));
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
