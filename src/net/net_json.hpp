#pragma once
// A built Net described as JSON, with the field names of the BVLC reference shape dumps
// (shared/reference/bvlc/shapes/*.json): net_name, phase, stages, layers (index, name, type,
// bottoms, tops, top_shapes, param_shapes, loss_weights), blobs (name, shape), input_blobs,
// output_blobs, num_learnable_params, num_learnable_params_unique. `crema inspect --json`.
#include <string>
#include <vector>

#include "crema/net.hpp"

namespace crema {

// `stages` are the NetState stages the net was built with (reported as given).
std::string NetToJson(const Net& net, const std::vector<std::string>& stages = {});

// A JSON string literal (quotes included) with the necessary escapes.
std::string JsonQuote(const std::string& text);
// The shortest decimal that reads back as the same float ("0.3", "1", "1e-08").
std::string JsonNumber(double value);

}  // namespace crema
