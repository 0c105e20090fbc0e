#pragma once
// Fillers initialise blobs from a FillerParameter: constant, uniform, gaussian (with sparse),
// positive_unitball, xavier, msra, bilinear; variance_norm FAN_IN, FAN_OUT or AVERAGE.
#include <string>

#include "crema/blob.hpp"
#include "crema/proto.hpp"

namespace crema {

// Fills `blob` (its data) according to `param`. ConfigError for an unknown type or
// invalid settings; `context` prefixes error messages (e.g. the layer's ErrorPrefix).
void FillBlob(const FillerParameter& param, Blob* blob, const std::string& context = "");

}  // namespace crema
