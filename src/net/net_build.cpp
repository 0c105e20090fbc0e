// Graph rewriting before a net is built: NetState filtering and Split insertion (Caffe's rules
// and names, so layer lists and .caffemodel files match Caffe's).
#include <map>
#include <set>
#include <utility>

#include "crema/net.hpp"

namespace crema {

bool StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  const std::set<std::string> stages(state.stage().begin(), state.stage().end());
  // All of the rule's stages must be present, none of its not_stages.
  for (const std::string& s : rule.stage())
    if (!stages.count(s)) return false;
  for (const std::string& s : rule.not_stage())
    if (stages.count(s)) return false;
  return true;
}

void FilterNet(const NetParameter& param, NetParameter* filtered,
               std::vector<int>* original_index) {
  const NetState& state = param.state();
  filtered->CopyFrom(param);
  filtered->clear_layer();
  if (original_index) original_index->clear();
  for (int i = 0; i < param.layer_size(); ++i) {
    const LayerParameter& layer = param.layer(i);
    if (layer.include_size() > 0 && layer.exclude_size() > 0)
      CREMA_THROW_CONFIG("layer \"", layer.name(),
                         "\": give either include rules or exclude rules, not both");
    // Without include rules a layer is in unless an exclude rule matches.
    bool included = layer.include_size() == 0;
    for (int j = 0; included && j < layer.exclude_size(); ++j)
      if (StateMeetsRule(state, layer.exclude(j), layer.name())) included = false;
    for (int j = 0; !included && j < layer.include_size(); ++j)
      if (StateMeetsRule(state, layer.include(j), layer.name())) included = true;
    if (included) {
      filtered->add_layer()->CopyFrom(layer);
      if (original_index) original_index->push_back(i);
    }
  }
}

std::string SplitLayerName(const std::string& layer_name, const std::string& blob_name,
                           int blob_idx) {
  return StrCat(blob_name, "_", layer_name, "_", blob_idx, "_split");
}

std::string SplitBlobName(const std::string& layer_name, const std::string& blob_name, int blob_idx,
                          int split_idx) {
  return StrCat(blob_name, "_", layer_name, "_", blob_idx, "_split_", split_idx);
}

void InsertSplits(const NetParameter& param, NetParameter* split_param,
                  std::vector<int>* original_index, const ErrorPrefixFn& where) {
  // Copies the net, then adds a Split layer after every top used more than once (a use as a
  // loss counts as a use, as in Caffe).
  split_param->CopyFrom(param);
  split_param->clear_layer();
  using TopIdx = std::pair<int, int>;  // (layer, top)
  std::map<std::string, TopIdx> last_top_of_blob;
  std::map<TopIdx, TopIdx> source_of_bottom;  // (layer, bottom) -> producing top
  std::map<TopIdx, int> uses_of_top;
  std::map<TopIdx, float> loss_weight_of_top;
  std::map<TopIdx, int> next_split_of_top;
  for (int i = 0; i < param.layer_size(); ++i) {
    const LayerParameter& layer = param.layer(i);
    for (int j = 0; j < layer.bottom_size(); ++j) {
      auto it = last_top_of_blob.find(layer.bottom(j));
      if (it == last_top_of_blob.end()) {
        std::string known;
        for (const auto& entry : last_top_of_blob)
          known += (known.empty() ? "" : ", ") + entry.first;
        throw ConfigError(StrCat(where ? where(i, StrCat("bottom[", j, "]")) : "",
                                 "unknown bottom blob \"", layer.bottom(j), "\" (bottom ", j,
                                 "); blobs produced before it: ", known.empty() ? "none" : known));
      }
      source_of_bottom[{i, j}] = it->second;
      ++uses_of_top[it->second];
    }
    for (int j = 0; j < layer.top_size(); ++j) last_top_of_blob[layer.top(j)] = {i, j};
    for (int j = 0; j < layer.top_size(); ++j) {
      const float weight = j < layer.loss_weight_size() ? layer.loss_weight(j) : 0.0f;
      if (weight != 0) {
        loss_weight_of_top[{i, j}] = weight;
        ++uses_of_top[{i, j}];
      }
    }
  }
  if (original_index) {
    std::vector<int> in = *original_index;
    original_index->clear();
    for (int i = 0; i < param.layer_size(); ++i) original_index->push_back(in.empty() ? i : in[i]);
  }
  std::vector<int> new_index;
  for (int i = 0; i < param.layer_size(); ++i) {
    LayerParameter* layer = split_param->add_layer();
    layer->CopyFrom(param.layer(i));
    new_index.push_back(original_index ? (*original_index)[i] : i);
    for (int j = 0; j < layer->bottom_size(); ++j) {
      const TopIdx source = source_of_bottom[{i, j}];
      if (uses_of_top[source] > 1) {
        const std::string& producer = param.layer(source.first).name();
        layer->set_bottom(j, SplitBlobName(producer, layer->bottom(j), source.second,
                                           next_split_of_top[source]++));
      }
    }
    for (int j = 0; j < layer->top_size(); ++j) {
      const TopIdx top{i, j};
      const int uses = uses_of_top[top];
      if (uses <= 1) continue;
      const float weight = loss_weight_of_top.count(top) ? loss_weight_of_top[top] : 0.0f;
      LayerParameter* split = split_param->add_layer();
      new_index.push_back(-1);
      const std::string& blob = layer->top(j);
      split->set_name(SplitLayerName(layer->name(), blob, j));
      split->set_type("Split");
      split->add_bottom(blob);
      for (int k = 0; k < uses; ++k) {
        split->add_top(SplitBlobName(layer->name(), blob, j, k));
        if (weight != 0) split->add_loss_weight(k == 0 ? weight : 0.0f);
      }
      if (weight != 0) {
        layer->clear_loss_weight();
        // The loss use is now the split's first top.
        next_split_of_top[top]++;
      }
    }
  }
  if (original_index) *original_index = new_index;
}

}  // namespace crema
