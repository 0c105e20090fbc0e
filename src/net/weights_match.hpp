#pragma once
// Weights that match nothing: Net::CopyTrainedLayersFrom copies layers by name and leaves the
// others alone, so an empty .caffemodel (0 bytes parse as an empty NetParameter) or the weights
// of another net load "successfully" and the net runs on its fillers. The tools that score or
// use a net (test, forward, classify, extract-features, export-onnx) refuse that; fine-tuning
// warns.
#include <string>

#include "crema/net.hpp"

namespace crema {

// "" when `copy` (from the weights at `path`) holds at least one of `net`'s layers with params,
// or when the net has none; otherwise the message saying so.
std::string UnmatchedWeightsMessage(const Net& net, const WeightsCopy& copy,
                                    const std::string& path);

// net->CopyTrainedLayersFrom(path), then a ConfigError with the message above when nothing of
// the net was found in the weights.
WeightsCopy CopyWeightsRequiringAMatch(Net* net, const std::string& path);

}  // namespace crema
