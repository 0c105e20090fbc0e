#pragma once
// Comparisons of two nets built from one prototxt (fused vs unfused, planned vs not).
#include <cstdint>
#include <string>
#include <vector>

#include "crema/net.hpp"

namespace crema::testing {

// A NetParameter from prototxt text; a text that does not parse fails the test.
NetParameter ParseNet(const std::string& text);

// "layer<sep>other" for each layer l with into[l] >= 0, in layer order: a net's fusion map
// (Net::relu_fused_into, sum_fused_into, depthwise_fused_into, ...) by layer names.
std::vector<std::string> LayerMapNames(const Net& net, const std::vector<int>& into,
                                       const char* sep);

// Whether two float32 blobs have the same shape and the same bits in data (or diff).
bool SameBits(const Blob& a, const Blob& b, bool diff);

// Every blob's data (and diff when `diffs`) has the same bits in both nets, and so has every
// learnable parameter's gradient (when `diffs`) and data (when `param_data`). `what` prefixes
// the failures.
void ExpectSameBlobs(const Net& a, const Net& b, bool diffs, bool param_data,
                     const std::string& what);

// Weights for comparing inference paths: every learnable blob uniform in [-0.5, 0.5], and each
// BatchNorm's variances in [0.5, 2] with moving-average factor 1 (seeds from `seed`).
void RandomInferenceWeights(Net* net, uint32_t seed);

// Gives every input of `net` batch size `batch` (its first axis) and reshapes the net.
void SetBatch(Net* net, int batch);

// Two nets of one prototxt (unfused and fused), RandomInferenceWeights(plain, seed) shared with
// `other`, at batch `batch`, two passes on the same uniform inputs: the same output bits.
void ExpectSameOutputs(Net* plain, Net* other, int batch, uint32_t seed);

}  // namespace crema::testing
