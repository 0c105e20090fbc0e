#pragma once
// A built Net described as JSON, with the field names of the BVLC reference shape dumps
// (shared/reference/bvlc/shapes/*.json): net_name, phase, stages, layers (index, name, type,
// bottoms, tops, top_shapes, param_shapes, loss_weights), blobs (name, shape), input_blobs,
// output_blobs, num_learnable_params, num_learnable_params_unique. `crema inspect --json`. The
// values go through io/json.hpp's JsonQuote and JsonNumber (included for the callers of both).
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "io/json.hpp"

namespace crema {

// `stages` are the NetState stages the net was built with (reported as given).
std::string NetToJson(const Net& net, const std::vector<std::string>& stages = {});

}  // namespace crema
