#pragma once
// crema plot, the chart: the panels stacked on one x axis (the training loss raw and averaged,
// the lr, one panel per test output; several runs overlaid, one colour each), their axes, ticks
// and legends, drawn on a Canvas.
#include <string>
#include <utility>
#include <vector>

#include "plot_canvas.hpp"
#include "plot_metrics.hpp"

namespace crema::cli {

// One line of a panel: its points, colour and width, markers for sparse series.
struct Curve {
  Series series;
  Color color;
  double width;
  bool dots;
  std::string id;
};

struct Panel {
  std::string title;
  bool log_y = false;
  std::vector<Curve> curves;
  std::vector<std::pair<std::string, Color>> legend;
};

// The panels of `runs`: the loss with a moving average over `smooth` records (0: about 1/50 of
// them), the lr (log scale when it spans more than 10x and stays positive), each test output.
std::vector<Panel> BuildPanels(const std::vector<Run>& runs, int smooth);
// The file's bytes: the panels stacked on one x axis labelled `x_label`, as PNG or SVG.
std::string DrawPanels(const std::vector<Panel>& panels, const std::string& x_label, bool png);

}  // namespace crema::cli
