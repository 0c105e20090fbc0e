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

}  // namespace crema::testing
