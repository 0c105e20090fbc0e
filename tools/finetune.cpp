#include "finetune.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>

#include "flags.hpp"
#include "net/weights_match.hpp"

DEFINE_bool(skip_mismatched, false,
            "With --weights: a layer whose blobs differ in shape (or number) from the weights "
            "keeps its fillers (learned from scratch) instead of stopping with an error.");
DEFINE_string(freeze, "",
              "Freeze layers: lr_mult 0 on every param blob of the train net's layers whose "
              "names fully match this ECMAScript regex (repeat the flag or give a comma list).");

namespace crema::cli {

void CopyWeightsWithReport(Solver* solver, const std::vector<std::string>& files,
                           bool skip_mismatched) {
  if (files.empty()) return;
  struct Origin {
    std::string copied_from;
    std::vector<std::string> skipped;  // "file: reason"
  };
  std::map<std::string, Origin> origins;
  for (const std::string& file : files) {
    LOG(INFO) << "Fine-tuning from " << file;
    WeightsCopy copy;
    try {
      copy = solver->net()->CopyTrainedLayersFrom(file, skip_mismatched);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      if (what.find("shape mismatch") == std::string::npos &&
          what.find(" blobs but the layer has ") == std::string::npos)
        throw;
      throw ConfigError(what + " Or pass --skip-mismatched to keep its fillers.");
    }
    const std::string unmatched = UnmatchedWeightsMessage(*solver->net(), copy, file);
    if (!unmatched.empty()) LOG(WARNING) << "--weights " << unmatched;
    for (const std::string& layer : copy.copied) origins[layer].copied_from = file;
    for (const auto& [layer, reason] : copy.skipped)
      origins[layer].skipped.push_back(file + ": " + reason);
    for (const auto& test_net : solver->test_nets())
      test_net->CopyTrainedLayersFrom(file, skip_mismatched);
  }
  const Net& net = *solver->net();
  int copied = 0, skipped = 0, fresh = 0;
  for (int i = 0; i < net.num_layers(); ++i) {
    if (net.layers()[i]->blobs().empty()) continue;
    const std::string& name = net.layer_names()[i];
    const Origin& origin = origins[name];
    if (!origin.copied_from.empty()) {
      ++copied;
      std::printf("weights: layer %s: copied from %s\n", name.c_str(), origin.copied_from.c_str());
    } else if (!origin.skipped.empty()) {
      ++skipped;
      std::printf("weights: layer %s: re-initialised from its fillers (--skip-mismatched)\n",
                  name.c_str());
    } else {
      ++fresh;
      std::printf("weights: layer %s: not in the weights, keeps its fillers\n", name.c_str());
    }
    for (const std::string& reason : origin.skipped)
      std::printf("weights: layer %s: skipped %s\n", name.c_str(), reason.c_str());
  }
  std::printf(
      "weights: %d layer(s) copied, %d skipped for a shape mismatch, %d not in the "
      "weights\n",
      copied, skipped, fresh);
  std::fflush(stdout);
}

std::vector<std::string> FreezePatterns(const std::string& flag) {
  std::vector<std::string> patterns;
  for (const std::string& value : RepeatedFlagValues(flag)) {
    std::string current;
    int braces = 0;
    for (char c : value) {
      if (c == '{') ++braces;
      if (c == '}' && braces > 0) --braces;
      if (c == ',' && braces == 0) {
        if (!current.empty()) patterns.push_back(current);
        current.clear();
        continue;
      }
      current += c;
    }
    if (!current.empty()) patterns.push_back(current);
  }
  return patterns;
}

void FreezeMatchingLayers(Solver* solver, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return;
  Net* net = solver->net();
  std::vector<std::string> frozen;
  for (const std::string& pattern : patterns) {
    std::regex regex;
    try {
      regex = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      CREMA_THROW_CONFIG("--freeze \"", pattern,
                         "\" is not a valid regular expression: ", e.what());
    }
    int matches = 0, without_params = 0;
    for (int i = 0; i < net->num_layers(); ++i) {
      const std::string& name = net->layer_names()[i];
      if (!std::regex_match(name, regex)) continue;
      if (net->layers()[i]->blobs().empty()) {
        ++without_params;
        continue;
      }
      ++matches;
      if (std::find(frozen.begin(), frozen.end(), name) == frozen.end()) frozen.push_back(name);
    }
    if (matches == 0)
      CREMA_THROW_CONFIG("--freeze \"", pattern,
                         "\" matches no layer with params of the train "
                         "net \"",
                         net->name(), "\"",
                         without_params > 0
                             ? StrCat(" (only ", without_params, " layer(s) without params)")
                             : std::string(),
                         "; the regex must match the whole layer name");
  }
  net->FreezeLayers(frozen);
  for (const std::string& name : frozen)
    std::printf("frozen: layer %s: lr_mult 0 on its %zu param blob(s)\n", name.c_str(),
                net->layer_by_name(name)->blobs().size());
  std::fflush(stdout);
}

}  // namespace crema::cli
