#pragma once
// Checks of single layers against hand-computed values and of their configuration errors.
#include <string>
#include <vector>

namespace crema::testing {

// Runs the layer described by `text` on x (shape {n}) in float and double and expects the top
// to be `y` and, unless `derivative` is empty, the bottom diff to be dy * derivative for the top
// diff dy_i = 0.5 + 0.25 i.
void ExpectValues(const std::string& text, const std::vector<double>& x,
                  const std::vector<double>& y, const std::vector<double>& derivative);

// SetUp of the layer `text` (named "bad") on bottoms of `shapes` must throw a ConfigError whose
// message names `field` and the layer.
void ExpectSetUpError(const std::string& text, const std::vector<std::vector<int>>& shapes,
                      const std::string& field);

// The same for a float64 layer on one bottom of `shape`.
void ExpectParamError(const std::string& text, const std::vector<int>& shape,
                      const std::string& field);

// A layer computing a ReLU's gradient (Layer::set_fused_relu_backward): the layer `text` (float32,
// bottoms of `shapes` with random values, zeros among them, and `num_tops` tops) asked for the
// ReLU of bottom `k` (slopes 0 and 0.25) says it took it, and its bottom diffs are, bit for bit,
// those of its plain Backward with bottom k's then passed through a ReLU layer's Backward (in
// place, reading bottom k's data as the ReLU's output).
void ExpectFusedReLUBackward(const std::string& text, const std::vector<std::vector<int>>& shapes,
                             int num_tops, int k);

}  // namespace crema::testing
