#pragma once
// A net as a Graphviz DOT graph (what `crema draw` and crema.draw render with `dot`), in the style
// of pycaffe's draw.py: layers are boxes labelled with name, type and their main parameters;
// blobs are octagons; in-place layers are drawn in a lighter colour and their output gets a new
// node so the graph stays acyclic.
#include <string>

#include "crema/proto.hpp"

namespace crema {

struct NetDotOptions {
  std::string rankdir = "LR";  // LR, TB, BT or RL
  bool filter_phase = false;   // keep only the layers that a net built for `phase` has
  Phase phase = TRAIN;
};

// ConfigError for a rankdir other than LR/TB/BT/RL.
std::string NetToDot(const NetParameter& param, const NetDotOptions& options = {});

}  // namespace crema
