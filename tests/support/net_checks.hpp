#pragma once
// Comparisons of two nets built from one prototxt (fused vs unfused, planned vs not).
#include <string>

#include "crema/net.hpp"

namespace crema::testing {

// Whether two float32 blobs have the same shape and the same bits in data (or diff).
bool SameBits(const Blob& a, const Blob& b, bool diff);

// Every blob's data (and diff when `diffs`) has the same bits in both nets, and so has every
// learnable parameter's gradient (when `diffs`) and data (when `param_data`). `what` prefixes
// the failures.
void ExpectSameBlobs(const Net& a, const Net& b, bool diffs, bool param_data,
                     const std::string& what);

// Gives every input of `net` batch size `batch` (its first axis) and reshapes the net.
void SetBatch(Net* net, int batch);

}  // namespace crema::testing
