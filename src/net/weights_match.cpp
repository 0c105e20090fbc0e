#include "net/weights_match.hpp"

#include <vector>

#include "crema/error.hpp"

namespace crema {

std::string UnmatchedWeightsMessage(const Net& net, const WeightsCopy& copy,
                                    const std::string& path) {
  if (!copy.copied.empty() || !copy.skipped.empty()) return "";
  std::vector<std::string> names;
  for (int i = 0; i < net.num_layers(); ++i)
    if (!net.layers()[i]->blobs().empty()) names.push_back(net.layer_names()[i]);
  if (names.empty()) return "";
  std::string listed;
  for (size_t i = 0; i < names.size() && i < 3; ++i) listed += (i ? ", " : "") + names[i];
  if (names.size() > 3) listed += ", ...";
  return StrCat(path, ": holds none of the ", names.size(), " layer(s) with params of net \"",
                net.name(), "\" (", listed,
                "): weights are matched by layer name, so an empty file or the weights of "
                "another net would leave every layer on its fillers");
}

WeightsCopy CopyWeightsRequiringAMatch(Net* net, const std::string& path) {
  WeightsCopy copy = net->CopyTrainedLayersFrom(path, /*skip_mismatched=*/false);
  const std::string problem = UnmatchedWeightsMessage(*net, copy, path);
  if (!problem.empty()) CREMA_THROW_CONFIG(problem);
  return copy;
}

}  // namespace crema
