#include "crema/net.hpp"

#include <glog/logging.h>
#ifndef CREMA_NO_HDF5
#include <hdf5.h>
#endif

#include <algorithm>
#include <cmath>
#include <set>

#include "core/workspace.hpp"
#include "crema/layer_registry.hpp"
#include "layers/batch_norm/batch_norm_layer.hpp"
#include "layers/scale/scale_layer.hpp"
#ifndef CREMA_NO_HDF5
#include "io/hdf5.hpp"
#endif
#include "crema/proto_io.hpp"
#include "math/math.hpp"
#include "net/memory_plan.hpp"

namespace crema {

Net::Net(const NetParameter& param, const NetOptions& options) { Init(param, options); }

Net::~Net() = default;

std::unique_ptr<Net> Net::FromFile(const std::string& path, Phase phase, int level,
                                   const std::vector<std::string>& stages, const Device& device,
                                   MemoryPlan memory_plan) {
  NetParameter param;
  NetOptions options;
  options.memory_plan = memory_plan;
  options.source = ReadNetParamsFromTextFile(path, &param);
  options.device = device;
  options.override_state = true;
  options.state.set_phase(phase);
  options.state.set_level(level);
  for (const std::string& s : stages) options.state.add_stage(s);
  return std::make_unique<Net>(param, options);
}

std::string Net::LayerLocation(int original_index, const std::string& field) const {
  if (!source_) return "";
  std::string path = StrCat("layer[", original_index, "]");
  if (!field.empty()) path += "." + field;
  return source_->Locate(original_param_, path);
}

std::string Net::ErrorAt(int index, const std::string& field) const {
  const int original =
      index < static_cast<int>(original_layer_index_.size()) ? original_layer_index_[index] : -1;
  const LayerParameter& layer = filtered_param_.layer(index);
  std::string where = original >= 0 ? LayerLocation(original, field) : "";
  if (where.empty() && source_) where = source_->path();
  return (where.empty() ? "" : where + ": ") + "layer \"" + layer.name() + "\" (" + layer.type() +
         "): ";
}

void Net::Init(const NetParameter& in_param, const NetOptions& options) {
  device_ = options.device;
  source_ = options.source;
  workspace_ = std::make_shared<Workspace>();
  memory_plan_in_place_ = options.memory_plan_in_place;
  NetParameter param_with_state = in_param;
  if (options.override_state) *param_with_state.mutable_state() = options.state;
  if (source_) original_param_ = param_with_state;
  phase_ = param_with_state.state().phase();

  NetParameter filtered;
  std::vector<int> index_map;
  FilterNet(param_with_state, &filtered, &index_map);
  // Errors raised before the final layer list exists name layers of `filtered`.
  auto filtered_where = [&](int i, const std::string& field) {
    std::string where = source_ ? LayerLocation(index_map[i], field) : "";
    return (where.empty() ? "" : where + ": ") + "layer \"" + filtered.layer(i).name() + "\" (" +
           filtered.layer(i).type() + "): ";
  };
  InsertSplits(filtered, &filtered_param_, &index_map, filtered_where);
  original_layer_index_ = index_map;
  NetParameter& param = filtered_param_;
  name_ = param.name();

  std::map<std::string, int> blob_name_to_idx;
  std::map<std::string, int> available_blobs;  // name -> 1; ordered, as Caffe's std::set
  const int num_layers = param.layer_size();
  amp_ = options.amp;
  std::set<std::string> output_names;  // the blobs nothing consumes (mixed precision's policy)
  for (const LayerParameter& layer : param.layer()) {
    for (const std::string& bottom : layer.bottom()) output_names.erase(bottom);
    for (const std::string& top : layer.top()) output_names.insert(top);
  }
  layer_bottoms_.resize(num_layers);
  layer_tops_.resize(num_layers);
  bottom_vecs_.resize(num_layers);
  top_vecs_.resize(num_layers);
  bottom_id_vecs_.resize(num_layers);
  param_id_vecs_.resize(num_layers);
  top_id_vecs_.resize(num_layers);
  bottom_need_backward_.resize(num_layers);

  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    LayerParameter* layer_param = param.mutable_layer(layer_id);
    if (!layer_param->has_phase()) layer_param->set_phase(phase_);
    if (layer_param->propagate_down_size() > 0 &&
        layer_param->propagate_down_size() != layer_param->bottom_size())
      throw ConfigError(ErrorAt(layer_id, "propagate_down") +
                        StrCat("propagate_down must be given 0 or ", layer_param->bottom_size(),
                               " times (once per bottom), got ",
                               layer_param->propagate_down_size()));
    std::unique_ptr<Layer> layer;
    try {
      layer = LayerRegistry::Create(*layer_param);
    } catch (const ConfigError& e) {
      throw ConfigError(ErrorAt(layer_id, "type") + e.what());
    }
    const int original = original_layer_index_[layer_id];
    if (source_ && original >= 0)
      layer->set_locator(
          [this, original](const std::string& field) { return LayerLocation(original, field); });
    else if (source_)
      layer->set_locator([this](const std::string&) { return source_->path(); });
    layer->set_device(device_);
    layer->set_workspace(workspace_);
    layers_.push_back(std::move(layer));
    layer_names_.push_back(layer_param->name());
    if (options.verbose) VLOG(1) << "Creating layer " << layer_param->name();

    for (int bottom_id = 0; bottom_id < layer_param->bottom_size(); ++bottom_id)
      AppendBottom(param, layer_id, bottom_id, &available_blobs, &blob_name_to_idx);
    int num_top = layer_param->top_size();
    for (int top_id = 0; top_id < num_top; ++top_id) {
      AppendTop(param, layer_id, top_id, &blob_name_to_idx);
      available_blobs[layer_param->top(top_id)] = 1;
      if (layer_param->type() == "Input") {
        const int blob_id = static_cast<int>(blobs_.size()) - 1;
        net_input_blob_indices_.push_back(blob_id);
        net_input_blobs_.push_back(blobs_[blob_id].get());
      }
    }
    Layer* layer_ptr = layers_[layer_id].get();
    if (layer_ptr->AutoTopBlobs()) {
      const int needed = std::max(layer_ptr->MinTopBlobs(), layer_ptr->ExactNumTopBlobs());
      for (; num_top < needed; ++num_top) AppendTop(param, layer_id, num_top, nullptr);
    }
    AmpSetUpLayer(layer_id, output_names);
    try {
      if (amp_ != Amp::kOff) AmpBind(layer_id);
      layer_ptr->SetUp(layer_bottoms_[layer_id], layer_tops_[layer_id]);
      for (int t : top_id_vecs_[layer_id])
        if (standins_[t]) blobs_[t]->ReshapeLike(*standins_[t]);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      // Layers prefix their own messages; add the location for those that don't.
      if (what.find("layer \"" + layer_param->name() + "\"") != std::string::npos) throw;
      throw ConfigError(ErrorAt(layer_id, "") + what);
    }
    if (options.verbose) LOG(INFO) << "Setting up " << layer_names_[layer_id];
    for (int top_id = 0; top_id < static_cast<int>(top_vecs_[layer_id].size()); ++top_id) {
      const int blob_id = top_id_vecs_[layer_id][top_id];
      if (static_cast<int>(blob_loss_weights_.size()) <= blob_id)
        blob_loss_weights_.resize(blob_id + 1, 0.0);
      blob_loss_weights_[blob_id] = layer_ptr->loss(top_id);
      if (options.verbose) {
        LOG(INFO) << "Top shape: " << top_vecs_[layer_id][top_id]->shape_string();
        if (layer_ptr->loss(top_id) != 0)
          LOG(INFO) << "    with loss weight " << layer_ptr->loss(top_id);
      }
    }
    const int param_size = layer_param->param_size();
    const int num_param_blobs = static_cast<int>(layer_ptr->blobs().size());
    if (param_size > num_param_blobs)
      throw ConfigError(ErrorAt(layer_id, "param") +
                        StrCat(param_size, " param specs given but the layer has ", num_param_blobs,
                               " learnable blob", num_param_blobs == 1 ? "" : "s"));
    const ParamSpec default_spec;
    param_need_backward_.emplace_back();
    for (int param_id = 0; param_id < num_param_blobs; ++param_id) {
      const ParamSpec& spec = param_id < param_size ? layer_param->param(param_id) : default_spec;
      param_need_backward_.back().push_back(spec.lr_mult() != 0);
    }
    for (int param_id = 0; param_id < num_param_blobs; ++param_id)
      AppendParam(param, layer_id, param_id);
    if (device_.is_cuda() && !layer_ptr->HasGpuKernels())
      LOG(WARNING) << "Layer " << layer_param->name() << " (" << layer_param->type()
                   << ") has no GPU kernel yet: it runs on the CPU inside this GPU net";
  }

  InferBackward(param.force_backward(), options.verbose);
  // Blobs nobody consumed are the net's outputs (in name order, as Caffe).
  for (const auto& entry : available_blobs) {
    const int blob_id = blob_name_to_idx[entry.first];
    net_output_blobs_.push_back(blobs_[blob_id].get());
    net_output_blob_indices_.push_back(blob_id);
  }
  for (int i = 0; i < static_cast<int>(blob_names_.size()); ++i)
    blob_names_index_[blob_names_[i]] = i;
  for (int i = 0; i < static_cast<int>(layer_names_.size()); ++i)
    layer_names_index_[layer_names_[i]] = i;
  // Shared parameters use their owner's memory.
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
    if (param_owners_[i] < 0) continue;
    params_[i]->ShareData(*params_[param_owners_[i]]);
    params_[i]->ShareDiff(*params_[param_owners_[i]]);
  }
  if (amp_ != Amp::kOff) {
    // One scratch for the stand-ins, sized to the layer that needs the most (they live in it
    // only while their layer runs).
    size_t scratch = 0;
    for (int i = 0; i < num_layers; ++i) {
      size_t bytes = 0;
      for (int b : AmpBlobs(i)) bytes += 2 * AmpScratchBytes(*blobs_[b]);
      scratch = std::max(scratch, bytes);
    }
    amp_scratch_ = std::make_shared<SyncedMemory>(scratch);
    for (int i = 0; i < num_layers; ++i) AmpBind(i);
  }
  debug_info_ = param.debug_info();
  fold_batch_norm_ = options.fold_batch_norm;
  fuse_relu_ = options.fuse_relu;
  channel_blocked_ = options.channel_blocked;
  fuse_sum_ = options.fuse_sum;
  fuse_depthwise_ = options.fuse_depthwise;
  fuse_batch_norm_ = options.fuse_batch_norm;
  keep_blobs_ = options.keep_blobs;
  PlanFold();
  if (options.memory_plan != MemoryPlan::kOff)
    SetMemoryPlan(options.memory_plan, options.keep_blobs);
  if (options.verbose) LOG(INFO) << "Network initialization done.";
}

void Net::InferBackward(bool force_backward, bool verbose) {
  // Forwards: a layer needs backward when a bottom does or one of its params is learned.
  const int num_layers = this->num_layers();
  std::fill(blob_need_backward_.begin(), blob_need_backward_.end(), false);
  layer_need_backward_.assign(num_layers, false);
  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    const LayerParameter& layer_param = filtered_param_.layer(layer_id);
    bool need_backward = false;
    for (size_t bottom_id = 0; bottom_id < bottom_id_vecs_[layer_id].size(); ++bottom_id) {
      const bool blob_needs = blob_need_backward_[bottom_id_vecs_[layer_id][bottom_id]];
      need_backward |= blob_needs;
      bottom_need_backward_[layer_id][bottom_id] =
          layer_param.propagate_down_size() > 0
              ? layer_param.propagate_down(static_cast<int>(bottom_id))
              : blob_needs;
    }
    for (size_t param_id = 0; param_id < param_need_backward_[layer_id].size(); ++param_id) {
      need_backward |= param_need_backward_[layer_id][param_id];
      layers_[layer_id]->set_param_propagate_down(static_cast<int>(param_id),
                                                  param_need_backward_[layer_id][param_id]);
    }
    layer_need_backward_[layer_id] = need_backward;
    if (need_backward)
      for (int blob_id : top_id_vecs_[layer_id]) blob_need_backward_[blob_id] = true;
  }
  // Walk backwards to find the blobs that contribute to a loss; layers that don't need no
  // backward pass, and bottoms whose gradient nobody wants are skipped.
  std::set<std::string> blobs_under_loss;
  std::set<std::string> blobs_skip_backward;
  for (int layer_id = num_layers - 1; layer_id >= 0; --layer_id) {
    bool contributes_loss = false;
    bool skip_propagate_down = true;
    for (int top_id = 0; top_id < static_cast<int>(top_vecs_[layer_id].size()); ++top_id) {
      const std::string& blob_name = blob_names_[top_id_vecs_[layer_id][top_id]];
      if (layers_[layer_id]->loss(top_id) != 0 || blobs_under_loss.count(blob_name))
        contributes_loss = true;
      if (!blobs_skip_backward.count(blob_name)) skip_propagate_down = false;
      if (contributes_loss && !skip_propagate_down) break;
    }
    if (layer_need_backward_[layer_id] && skip_propagate_down) {
      layer_need_backward_[layer_id] = false;
      std::fill(bottom_need_backward_[layer_id].begin(), bottom_need_backward_[layer_id].end(),
                false);
    }
    if (!contributes_loss) layer_need_backward_[layer_id] = false;
    if (verbose)
      VLOG(1) << layer_names_[layer_id]
              << (layer_need_backward_[layer_id] ? " needs backward computation."
                                                 : " does not need backward computation.");
    for (int bottom_id = 0; bottom_id < static_cast<int>(bottom_vecs_[layer_id].size());
         ++bottom_id) {
      const std::string& blob_name = blob_names_[bottom_id_vecs_[layer_id][bottom_id]];
      if (contributes_loss)
        blobs_under_loss.insert(blob_name);
      else
        bottom_need_backward_[layer_id][bottom_id] = false;
      if (!bottom_need_backward_[layer_id][bottom_id]) blobs_skip_backward.insert(blob_name);
    }
  }
  if (force_backward) {
    for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
      layer_need_backward_[layer_id] = true;
      for (int bottom_id = 0; bottom_id < static_cast<int>(bottom_vecs_[layer_id].size());
           ++bottom_id) {
        const bool need = bottom_need_backward_[layer_id][bottom_id] ||
                          layers_[layer_id]->AllowForceBackward(bottom_id);
        bottom_need_backward_[layer_id][bottom_id] = need;
        const int blob_id = bottom_id_vecs_[layer_id][bottom_id];
        blob_need_backward_[blob_id] = blob_need_backward_[blob_id] || need;
      }
      for (int param_id = 0; param_id < static_cast<int>(layers_[layer_id]->blobs().size());
           ++param_id)
        layers_[layer_id]->set_param_propagate_down(param_id, true);
    }
  }
}

void Net::FreezeLayers(const std::vector<std::string>& layer_names) {
  std::set<int> frozen;
  for (const std::string& name : layer_names) {
    const int layer_id = layer_index(name);
    if (layer_id < 0) CREMA_THROW_CONFIG("cannot freeze layer \"", name, "\": no such layer");
    frozen.insert(layer_id);
  }
  std::set<int> frozen_learnables;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto [layer_id, param_id] = param_layer_indices_[i];
    if (!frozen.count(layer_id)) continue;
    param_need_backward_[layer_id][param_id] = false;
    params_lr_[learnable_param_ids_[i]] = 0;
    has_params_lr_[learnable_param_ids_[i]] = true;
    frozen_learnables.insert(learnable_param_ids_[i]);
  }
  // A blob shared with a layer that is not frozen would be learned through that layer anyway.
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto [layer_id, param_id] = param_layer_indices_[i];
    if (frozen.count(layer_id) || !frozen_learnables.count(learnable_param_ids_[i]) ||
        !param_need_backward_[layer_id][param_id])
      continue;
    const int owner = param_owners_[i] < 0 ? static_cast<int>(i) : param_owners_[i];
    CREMA_THROW_CONFIG("cannot freeze param \"", param_display_names_[i], "\" (owned by layer \"",
                       layer_names_[param_layer_indices_[owner].first],
                       "\"): it is shared with layer \"", layer_names_[layer_id],
                       "\", which is not frozen; freeze both");
  }
  InferBackward(filtered_param_.force_backward(), false);
}

void Net::AppendTop(const NetParameter& param, int layer_id, int top_id,
                    std::map<std::string, int>* blob_name_to_idx) {
  const LayerParameter& layer_param = param.layer(layer_id);
  const std::string blob_name =
      layer_param.top_size() > top_id ? layer_param.top(top_id) : "(automatic)";
  if (blob_name_to_idx && layer_param.bottom_size() > top_id &&
      blob_name == layer_param.bottom(top_id)) {
    // In place: the top is the bottom's blob.
    const int blob_id = (*blob_name_to_idx)[blob_name];
    if (!layers_[layer_id]->AllowsInPlace() && layers_[layer_id]->ExactNumBottomBlobs() != 0)
      LOG(WARNING) << "Layer " << layer_param.name() << " (" << layer_param.type()
                   << ") computes in place, which it does not declare support for";
    top_vecs_[layer_id].push_back(blobs_[blob_id].get());
    top_id_vecs_[layer_id].push_back(blob_id);
    return;
  }
  if (blob_name_to_idx && blob_name_to_idx->count(blob_name))
    throw ConfigError(ErrorAt(layer_id, StrCat("top[", top_id, "]")) +
                      StrCat("top blob \"", blob_name,
                             "\" is produced by more than one layer (only in-place layers, whose "
                             "top equals their bottom, may reuse a name)"));
  auto blob = std::make_shared<Blob>();
  const int blob_id = static_cast<int>(blobs_.size());
  blobs_.push_back(blob);
  standins_.emplace_back();
  blob_names_.push_back(blob_name);
  blob_need_backward_.push_back(false);
  if (blob_name_to_idx) (*blob_name_to_idx)[blob_name] = blob_id;
  top_id_vecs_[layer_id].push_back(blob_id);
  top_vecs_[layer_id].push_back(blob.get());
}

int Net::AppendBottom(const NetParameter& param, int layer_id, int bottom_id,
                      std::map<std::string, int>* available_blobs,
                      std::map<std::string, int>* blob_name_to_idx) {
  const LayerParameter& layer_param = param.layer(layer_id);
  const std::string& blob_name = layer_param.bottom(bottom_id);
  if (!available_blobs->count(blob_name))
    throw ConfigError(ErrorAt(layer_id, StrCat("bottom[", bottom_id, "]")) +
                      StrCat("unknown bottom blob \"", blob_name, "\" (bottom ", bottom_id, ")"));
  const int blob_id = (*blob_name_to_idx)[blob_name];
  bottom_vecs_[layer_id].push_back(blobs_[blob_id].get());
  bottom_id_vecs_[layer_id].push_back(blob_id);
  available_blobs->erase(blob_name);
  bool need_backward = blob_need_backward_[blob_id];
  if (layer_param.propagate_down_size() > 0) need_backward = layer_param.propagate_down(bottom_id);
  bottom_need_backward_[layer_id].push_back(need_backward);
  return blob_id;
}

void Net::AppendParam(const NetParameter& param, int layer_id, int param_id) {
  const LayerParameter& layer_param = layers_[layer_id]->layer_param();
  const int param_size = layer_param.param_size();
  const std::string param_name = param_size > param_id ? layer_param.param(param_id).name() : "";
  param_display_names_.push_back(param_name.empty() ? std::to_string(param_id) : param_name);
  const int net_param_id = static_cast<int>(params_.size());
  params_.push_back(layers_[layer_id]->blobs()[param_id]);
  param_id_vecs_[layer_id].push_back(net_param_id);
  param_layer_indices_.emplace_back(layer_id, param_id);
  const ParamSpec default_spec;
  const ParamSpec& spec = param_size > param_id ? layer_param.param(param_id) : default_spec;
  if (param_name.empty() || !param_names_index_.count(param_name)) {
    // Anonymous, or the first use of a name: this layer owns the blob.
    param_owners_.push_back(-1);
    if (!param_name.empty()) param_names_index_[param_name] = net_param_id;
    const int learnable_id = static_cast<int>(learnable_params_.size());
    learnable_params_.push_back(params_[net_param_id].get());
    learnable_param_ids_.push_back(learnable_id);
    has_params_lr_.push_back(spec.has_lr_mult());
    has_params_decay_.push_back(spec.has_decay_mult());
    params_lr_.push_back(spec.lr_mult());
    params_weight_decay_.push_back(spec.decay_mult());
    return;
  }
  const int owner_net_param_id = param_names_index_[param_name];
  param_owners_.push_back(owner_net_param_id);
  const auto [owner_layer_id, owner_param_id] = param_layer_indices_[owner_net_param_id];
  LOG(INFO) << "Sharing parameters '" << param_name << "' owned by layer '"
            << layer_names_[owner_layer_id] << "', param index " << owner_param_id;
  const Blob& this_blob = *layers_[layer_id]->blobs()[param_id];
  const Blob& owner_blob = *layers_[owner_layer_id]->blobs()[owner_param_id];
  const std::string field = StrCat("param[", param_id, "]");
  if (spec.share_mode() == ParamSpec::PERMISSIVE) {
    if (this_blob.count() != owner_blob.count())
      throw ConfigError(ErrorAt(layer_id, field) +
                        StrCat("cannot share param \"", param_name, "\" owned by layer \"",
                               layer_names_[owner_layer_id], "\": count mismatch (owner shape ",
                               owner_blob.shape_string(), ", this shape ", this_blob.shape_string(),
                               ")"));
  } else if (this_blob.shape() != owner_blob.shape()) {
    throw ConfigError(ErrorAt(layer_id, field) +
                      StrCat("cannot share param \"", param_name, "\" owned by layer \"",
                             layer_names_[owner_layer_id], "\": shape mismatch (owner shape ",
                             owner_blob.shape_string(), ", this shape ", this_blob.shape_string(),
                             "); use share_mode: PERMISSIVE to only compare counts"));
  }
  const int learnable_id = learnable_param_ids_[owner_net_param_id];
  learnable_param_ids_.push_back(learnable_id);
  if (spec.has_lr_mult()) {
    if (has_params_lr_[learnable_id] && spec.lr_mult() != params_lr_[learnable_id])
      throw ConfigError(ErrorAt(layer_id, field + ".lr_mult") +
                        StrCat("shared param \"", param_name, "\" has a different lr_mult (",
                               spec.lr_mult(), " vs ", params_lr_[learnable_id], ")"));
    has_params_lr_[learnable_id] = true;
    params_lr_[learnable_id] = spec.lr_mult();
  }
  if (spec.has_decay_mult()) {
    if (has_params_decay_[learnable_id] && spec.decay_mult() != params_weight_decay_[learnable_id])
      throw ConfigError(ErrorAt(layer_id, field + ".decay_mult") +
                        StrCat("shared param \"", param_name, "\" has a different decay_mult (",
                               spec.decay_mult(), " vs ", params_weight_decay_[learnable_id], ")"));
    has_params_decay_[learnable_id] = true;
    params_weight_decay_[learnable_id] = spec.decay_mult();
  }
}

void Net::CheckFinite(int layer_id, bool forward) const {
  const auto fail = [&](const std::string& what, const std::string& blob, double asum) {
    throw NonFiniteError(StrCat("--check-nan: layer \"", layer_names_[layer_id], "\" (",
                                layers_[layer_id]->type(), ") produced a non-finite ", what, " \"",
                                blob, "\" (sum of |values| = ", asum, ") in the ",
                                forward ? "forward" : "backward", " pass"));
  };
  if (forward) {
    for (size_t j = 0; j < top_vecs_[layer_id].size(); ++j) {
      const double asum = top_vecs_[layer_id][j]->asum_data();
      if (!std::isfinite(asum)) fail("output", blob_names_[top_id_vecs_[layer_id][j]], asum);
    }
    return;
  }
  for (size_t j = 0; j < bottom_vecs_[layer_id].size(); ++j) {
    if (!bottom_need_backward_[layer_id][j]) continue;
    const double asum = bottom_vecs_[layer_id][j]->asum_diff();
    if (!std::isfinite(asum))
      fail("gradient of input", blob_names_[bottom_id_vecs_[layer_id][j]], asum);
  }
  const auto& params = layers_[layer_id]->blobs();
  for (size_t j = 0; j < params.size(); ++j) {
    const double asum = params[j]->asum_diff();
    if (!std::isfinite(asum))
      fail("gradient of parameter", StrCat(layer_names_[layer_id], "[", j, "]"), asum);
  }
}

double Net::ForwardFromTo(int start, int end) {
  CREMA_ASSERT(start >= 0 && end < num_layers() && start <= end + 1, start, " ", end);
  // Re-planning discards intermediate values, so only before a pass that starts afresh.
  const bool shared_memory_moved =
      shared_memory_ && shared_memory_->generation() != shared_memory_generation_;
  if ((memory_plan_stale_ || shared_memory_moved) && start == 0) ApplyMemoryPlan();
  if (fold_stale_) ApplyFold();
  double loss = 0;
  for (int i = start; i <= end; ++i) {
    if (folded_into_[i] >= 0) {
      // Folded into a convolution: the top is the bottom's value.
      Blob* bottom = bottom_vecs_[i][0];
      Blob* top = top_vecs_[i][0];
      if (top != bottom) {
        top->ReshapeLike(*bottom);
        if (top->data() != bottom->data()) top->ShareData(*bottom);
      }
      continue;
    }
    // A fused ReLU whose producer ran in this pass: its value is in place already.
    if (relu_fused_into_[i] >= start) continue;
    // An Eltwise SUM its convolution computed in this pass.
    if (sum_fused_into_[i] >= start && sum_ran_fused_[i]) continue;
    // A depthwise convolution its 1x1 convolution computed in this pass.
    if (depthwise_fused_into_[i] >= start && depthwise_ran_fused_[i]) continue;
    if (const int bn = fused_into_batch_norm_[i]; bn >= 0 && group_scale_of_[bn] == i) {
      // The Scale of a BatchNorm group: computed by the BatchNorm when it ran fused in this
      // pass, else reading the BatchNorm's kept output when that ran in this pass.
      auto* batch_norm = static_cast<BatchNormLayer*>(layers_[bn].get());
      if (bn >= start && batch_norm->ran_fused()) continue;
      // Run on its own now, so the group's Backward must run layer by layer.
      batch_norm->ForgetFusedForward();
      static_cast<ScaleLayer*>(layers_[i].get())
          ->set_bottom_kept_by(bn >= start && batch_norm->keeps_x_norm() ? &batch_norm->x_norm()
                                                                         : nullptr);
    }
    if (const int scale = group_scale_of_[i]; scale >= 0) {
      // A BatchNorm group runs as one pass when its Scale is in this pass.
      const int relu = fused_relu_of_[scale];
      const bool fused = scale <= end && !check_finite_ && !debug_info_;
      static_cast<BatchNormLayer*>(layers_[i].get())
          ->set_fused_scale(
              fused ? static_cast<ScaleLayer*>(layers_[scale].get()) : nullptr,
              relu >= 0 && relu <= end,
              relu >= 0 ? layers_[relu]->layer_param().relu_param().negative_slope() : 0.f);
    }
    Layer* layer = forward_layer(i);
    if (const int relu = fused_relu_of_[i]; relu >= 0)
      layer->set_fused_relu(relu <= end,
                            layers_[relu]->layer_param().relu_param().negative_slope());
    running_layer_ = i;
    if (channel_blocked_active_) ChannelBlockedBefore(i, layer);
    if (fused_sum_of_[i] >= 0) PrepareFusedSum(i, end, layer);
    if (fused_depthwise_of_[i] >= 0) PrepareFusedDepthwise(i, end, layer);
    AmpBefore(i, false);
    loss += layer->Forward(layer_bottoms_[i], layer_tops_[i]);
    if (fused_sum_of_[i] >= 0) AfterFusedSum(i, layer);
    if (fused_depthwise_of_[i] >= 0) AfterFusedDepthwise(i, layer);
    if (channel_blocked_active_) ChannelBlockedAfter(i);
    AmpAfter(i, false);
    if (debug_info_) ForwardDebugInfo(i);
    if (check_finite_) CheckFinite(i, true);
  }
  running_layer_ = -1;
  if (memory_layout_ && end == num_layers() - 1) CheckMemoryPlan();
  return loss / loss_scale_;
}

void Net::SetMemoryPlan(MemoryPlan mode, const std::vector<std::string>& keep_blobs) {
  for (const std::string& name : keep_blobs)
    if (!has_blob(name))
      CREMA_THROW_CONFIG("cannot keep blob \"", name, "\" under the memory plan of net \"", name_,
                         "\": no such blob");
  // Blobs leave the old plan's buffers for memory of their own (allocated on first use); the
  // layers' Reshape then restores the sharing they set up (Reshape, one-input Concat).
  const bool had_plan = !planned_data_.empty();
  for (size_t b = 0; b < planned_data_.size(); ++b) {
    Blob& blob = *blobs_[b];
    const size_t bytes = static_cast<size_t>(blob.count()) * SizeOf(blob.dtype());
    if (!planned_data_[b].expired() && blob.data() == planned_data_[b].lock())
      blob.UseDataMemory(std::make_shared<SyncedMemory>(bytes));
    if (!planned_diff_[b].expired() && blob.diff() == planned_diff_[b].lock())
      blob.UseDiffMemory(std::make_shared<SyncedMemory>(bytes));
  }
  planned_data_.clear();
  planned_diff_.clear();
  memory_layout_.reset();
  PlanChannelBlocked();
  PlanFuseSum();
  if (had_plan)
    for (int i = 0; i < num_layers(); ++i) ReshapeLayer(i);
  memory_plan_ = mode;
  keep_blobs_ = keep_blobs;
  // An inference plan refuses Backward, so layers may drop what only Backward reads.
  for (auto& layer : layers_) layer->set_forward_only(mode == MemoryPlan::kInference);
  PlanFold();
  if (mode == MemoryPlan::kOff) return;
  memory_layout_ = std::make_unique<MemoryPlanLayout>(
      PlanNetMemory(*this, mode, std::set<std::string>(keep_blobs.begin(), keep_blobs.end()),
                    memory_plan_in_place_));
  ApplyMemoryPlan();
}

void Net::ApplyMemoryPlan() {
  memory_plan_stale_ = false;
  if (!memory_layout_) return;
  MemoryPlanLayout& layout = *memory_layout_;
  AssignMemoryBuffers(*this, &layout);
  planned_data_.assign(blobs_.size(), {});
  planned_diff_.assign(blobs_.size(), {});
  std::shared_ptr<SyncedMemory> arena;
  if (shared_memory_) {
    arena = shared_memory_->Acquire({layout.arena_bytes})[0];
    shared_memory_generation_ = shared_memory_->generation();
  } else {
    arena = std::make_shared<SyncedMemory>(layout.arena_bytes);
  }
  // One view of the arena per group: its blobs share it, as they share memory unplanned.
  std::vector<std::shared_ptr<SyncedMemory>> data_views(layout.data_groups.size());
  for (const auto* kind : {&layout.data_groups, &layout.diff_groups}) {
    const bool diff = kind == &layout.diff_groups;
    for (const MemoryPlanLayout::Group& group : *kind) {
      if (group.offset < 0) continue;
      auto view = SyncedMemory::View(arena, static_cast<size_t>(group.offset), group.bytes);
      if (!diff) data_views[&group - layout.data_groups.data()] = view;
      for (int b : group.blobs) {
        if (diff) {
          blobs_[b]->UseDiffMemory(view);
          planned_diff_[b] = view;
        } else {
          blobs_[b]->UseDataMemory(view);
          planned_data_[b] = view;
        }
      }
    }
  }
  // A Concat's top that holds its bottoms (Group::nested) is used now, while nothing is in it:
  // memory is cleared at its first use (SyncedMemory::ToCpu), which would wipe the bottoms
  // written into it when the Concat first writes its top.
  for (const MemoryPlanLayout::Group& group : layout.data_groups)
    if (group.nested) data_views[group.parent]->mutable_cpu_data();
  PlanChannelBlocked();
  PlanFuseSum();
}

void Net::ShareActivationMemory(std::shared_ptr<SharedActivationMemory> memory) {
  shared_memory_ = std::move(memory);
  ApplyMemoryPlan();
}

size_t Net::planned_bytes() const { return memory_layout_ ? memory_layout_->arena_bytes : 0; }

void Net::CheckMemoryPlan() {
  for (size_t b = 0; b < planned_data_.size() && !memory_plan_stale_; ++b) {
    const bool data_moved =
        !planned_data_[b].expired() && blobs_[b]->data() != planned_data_[b].lock();
    const bool diff_moved =
        !planned_diff_[b].expired() && blobs_[b]->diff() != planned_diff_[b].lock();
    if (data_moved || diff_moved) memory_plan_stale_ = true;
  }
}

double Net::Forward() { return ForwardFromTo(0, num_layers() - 1); }

void Net::BackwardFromTo(int start, int end) {
  CREMA_ASSERT(end >= 0 && start < num_layers(), start, " ", end);
  if (memory_plan_ == MemoryPlan::kInference)
    CREMA_THROW_RUNTIME("net \"", name_, "\": Backward on a net whose activation memory is ",
                        "planned for inference (forward only); plan it for training or not at ",
                        "all (--memory-plan=false, NetOptions::memory_plan)");
  if (std::any_of(folded_into_.begin(), folded_into_.end(), [](int c) { return c >= 0; }))
    CREMA_THROW_RUNTIME(
        "net \"", name_, "\": Backward on a net with BatchNorm folded into its ",
        "convolutions (inference only); build it without folding (--fold-bn=false, ",
        "NetOptions::fold_batch_norm)");
  backward_done_.assign(num_layers(), 0);
  for (int i = start; i >= end; --i) {
    running_layer_ = i;
    if (backward_done_[i]) continue;
    if (const int bn = FusedBackwardGroup(i, start, end); bn >= 0) {
      // The ReLU's, the Scale's and the BatchNorm's backward in one BatchNorm call.
      const bool bottom_down = layer_need_backward_[bn] && bottom_need_backward_[bn][0];
      // (The group's blobs are the BatchNorm's: its in-place Scale's are its top.)
      if (channel_blocked_active_) ChannelBlockedBackwardBefore(bn, layers_[bn].get());
      AmpBefore(bn, true);
      static_cast<BatchNormLayer*>(layers_[bn].get())
          ->BackwardFused(layer_tops_[bn], bottom_down, layer_bottoms_[bn]);
      AmpAfter(bn, true, &bottom_need_backward_[bn]);
      backward_done_[group_scale_of_[bn]] = 1;
      backward_done_[bn] = 1;
      continue;
    }
    if (!layer_need_backward_[i]) continue;
    const bool relu_fused = PrepareFusedReLUBackward(i, end);
    if (channel_blocked_active_) {
      // A group's Scale reads the BatchNorm's kept y in a Backward of its own: plain, as it.
      if (const int bn = fused_into_batch_norm_[i]; bn >= 0 && group_scale_of_[bn] == i)
        static_cast<BatchNormLayer*>(layers_[bn].get())->PlainXNorm();
      ChannelBlockedBackwardBefore(i, layers_[i].get());
    }
    BackwardLayer(i);
    if (channel_blocked_active_) ChannelBlockedBackwardAfter(i);
    if (relu_fused) AfterFusedReLUBackward(i);
    if (debug_info_) BackwardDebugInfo(i);
    if (check_finite_) CheckFinite(i, false);
  }
  running_layer_ = -1;
}

void Net::Backward() {
  BackwardFromTo(num_layers() - 1, 0);
  if (debug_info_) {
    double asum_data = 0, asum_diff = 0, sumsq_data = 0, sumsq_diff = 0;
    for (Blob* p : learnable_params_) {
      asum_data += p->asum_data();
      asum_diff += p->asum_diff();
      sumsq_data += p->sumsq_data();
      sumsq_diff += p->sumsq_diff();
    }
    LOG(INFO) << "    [Backward] All net params (data, diff): L1 norm = (" << asum_data << ", "
              << asum_diff << "); L2 norm = (" << std::sqrt(sumsq_data) << ", "
              << std::sqrt(sumsq_diff) << ")";
  }
}

void Net::Reshape() {
  for (int i = 0; i < num_layers(); ++i) ReshapeLayer(i);
  ApplyMemoryPlan();
}

void Net::ForwardDebugInfo(int layer_id) {
  for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
    const Blob& blob = *top_vecs_[layer_id][t];
    LOG(INFO) << "    [Forward] Layer " << layer_names_[layer_id] << ", top blob "
              << blob_names_[top_id_vecs_[layer_id][t]]
              << " data: " << blob.asum_data() / std::max<int64_t>(1, blob.count());
  }
  for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
    const Blob& blob = *layers_[layer_id]->blobs()[p];
    LOG(INFO) << "    [Forward] Layer " << layer_names_[layer_id] << ", param blob " << p
              << " data: " << blob.asum_data() / std::max<int64_t>(1, blob.count());
  }
}

void Net::BackwardDebugInfo(int layer_id) {
  for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
    if (!bottom_need_backward_[layer_id][b]) continue;
    const Blob& blob = *bottom_vecs_[layer_id][b];
    LOG(INFO) << "    [Backward] Layer " << layer_names_[layer_id] << ", bottom blob "
              << blob_names_[bottom_id_vecs_[layer_id][b]]
              << " diff: " << blob.asum_diff() / std::max<int64_t>(1, blob.count());
  }
  for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
    if (!layers_[layer_id]->param_propagate_down(static_cast<int>(p))) continue;
    const Blob& blob = *layers_[layer_id]->blobs()[p];
    LOG(INFO) << "    [Backward] Layer " << layer_names_[layer_id] << ", param blob " << p
              << " diff: " << blob.asum_diff() / std::max<int64_t>(1, blob.count());
  }
}

void Net::ClearParamDiffs(bool lazily) {
  for (Blob* p : learnable_params_) lazily ? p->SetDiffZeroLazily() : p->SetDiffZero();
}

void Net::Update() {
  for (Blob* p : learnable_params_) p->Update();
  ParamsUpdated();
}

void Net::ParamsUpdated() {
  if (fold_batch_norm_) fold_stale_ = true;
}

void Net::ShareTrainedLayersWith(const Net& other) {
  if (fold_batch_norm_) fold_stale_ = true;
  for (int i = 0; i < other.num_layers(); ++i) {
    const std::string& name = other.layer_names_[i];
    auto it = layer_names_index_.find(name);
    if (it == layer_names_index_.end()) continue;
    auto& source_blobs = other.layers_[i]->blobs();
    auto& target_blobs = layers_[it->second]->blobs();
    if (source_blobs.size() != target_blobs.size())
      CREMA_THROW_CONFIG("layer \"", name, "\": the train net has ", source_blobs.size(),
                         " learnable blobs but the test net has ", target_blobs.size());
    for (size_t j = 0; j < target_blobs.size(); ++j) {
      if (source_blobs[j]->shape() != target_blobs[j]->shape())
        CREMA_THROW_CONFIG("layer \"", name, "\": cannot share param ", j,
                           " between the train and test nets: shape ",
                           source_blobs[j]->shape_string(), " vs ",
                           target_blobs[j]->shape_string());
      target_blobs[j]->ShareData(*source_blobs[j]);
    }
  }
}

void Net::CopyTrainedLayersFrom(const NetParameter& param) { CopyTrainedLayersFrom(param, false); }

void Net::CopyTrainedLayersFrom(const std::string& path) { CopyTrainedLayersFrom(path, false); }

WeightsCopy Net::CopyTrainedLayersFrom(const NetParameter& param, bool skip_mismatched) {
  if (fold_batch_norm_) fold_stale_ = true;
  WeightsCopy result;
  for (const LayerParameter& source_layer : param.layer()) {
    const std::string& name = source_layer.name();
    auto it = layer_names_index_.find(name);
    if (it == layer_names_index_.end()) {
      VLOG(1) << "Ignoring source layer " << name;
      continue;
    }
    auto& target_blobs = layers_[it->second]->blobs();
    // Every blob is checked before any is copied, so a skipped layer keeps all its fillers.
    std::string mismatch;
    if (static_cast<int>(target_blobs.size()) != source_layer.blobs_size()) {
      mismatch = StrCat("the weights have ", source_layer.blobs_size(), " blobs but the layer has ",
                        target_blobs.size());
    } else {
      for (size_t j = 0; j < target_blobs.size() && mismatch.empty(); ++j) {
        const BlobProto& source_blob = source_layer.blobs(static_cast<int>(j));
        if (target_blobs[j]->ShapeEquals(source_blob)) continue;
        Blob shaped;
        shaped.FromProto(source_blob, true);
        mismatch = StrCat("param ", j, ": shape mismatch, the weights have ", shaped.shape_string(),
                          " but the net has ", target_blobs[j]->shape_string());
      }
    }
    if (!mismatch.empty()) {
      if (!skip_mismatched)
        CREMA_THROW_CONFIG("cannot copy layer \"", name, "\" ", mismatch,
                           ". To learn this layer from scratch instead, rename it.");
      result.skipped.emplace_back(name, mismatch);
      continue;
    }
    for (size_t j = 0; j < target_blobs.size(); ++j) {
      try {
        target_blobs[j]->FromProto(source_layer.blobs(static_cast<int>(j)), false);
      } catch (const ConfigError& e) {
        CREMA_THROW_CONFIG("layer \"", name, "\" param ", j, ": ", e.what());
      }
    }
    if (!target_blobs.empty()) result.copied.push_back(name);
  }
  return result;
}

namespace {
bool IsHdf5Path(const std::string& path) {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
}
}  // namespace

WeightsCopy Net::CopyTrainedLayersFrom(const std::string& path, bool skip_mismatched) {
  if (!IsHdf5Path(path)) {
    NetParameter param;
    ReadNetParamsFromBinaryFile(path, &param);
    try {
      return CopyTrainedLayersFrom(param, skip_mismatched);
    } catch (const ConfigError& e) {
      CREMA_THROW_CONFIG(path, ": ", e.what());
    }
  }
#ifdef CREMA_NO_HDF5
  CREMA_THROW_RUNTIME(path, ": HDF5 weights need a crema build with HDF5; this inference-only ",
                      "build reads binary .caffemodel files (convert with the full build: load ",
                      "the .h5 and save the net as .caffemodel)");
#else
  if (fold_batch_norm_) fold_stale_ = true;
  WeightsCopy result;
  Hdf5File file(path, Hdf5File::Mode::kRead);
  hid_t data = file.OpenGroup("data");
  for (const std::string& name : Hdf5ChildNames(data)) {
    auto it = layer_names_index_.find(name);
    if (it == layer_names_index_.end()) {
      VLOG(1) << "Ignoring source layer " << name;
      continue;
    }
    const int layer_id = it->second;
    auto& target_blobs = layers_[layer_id]->blobs();
    hid_t layer_group = H5Gopen2(data, name.c_str(), H5P_DEFAULT);
    if (layer_group < 0) CREMA_THROW_RUNTIME(path, ": cannot open group data/", name);
    const size_t num_source = Hdf5ChildNames(layer_group).size();
    std::string mismatch;
    if (num_source > target_blobs.size())
      mismatch =
          StrCat("the weights have ", num_source, " blobs but the layer has ", target_blobs.size());
    for (size_t j = 0; j < target_blobs.size() && mismatch.empty(); ++j) {
      const std::string dataset = std::to_string(j);
      if (H5Lexists(layer_group, dataset.c_str(), H5P_DEFAULT) <= 0) continue;
      const std::vector<int> shape = Hdf5DatasetShape(layer_group, dataset);
      if (skip_mismatched && shape != target_blobs[j]->shape()) {
        Blob shaped(shape);
        mismatch = StrCat("param ", j, ": shape mismatch, the weights have ", shaped.shape_string(),
                          " but the net has ", target_blobs[j]->shape_string());
      }
    }
    if (!mismatch.empty()) {
      H5Gclose(layer_group);
      if (!skip_mismatched) CREMA_THROW_CONFIG(path, ": layer \"", name, "\": ", mismatch);
      result.skipped.emplace_back(name, mismatch);
      continue;
    }
    for (size_t j = 0; j < target_blobs.size(); ++j) {
      const std::string dataset = std::to_string(j);
      if (H5Lexists(layer_group, dataset.c_str(), H5P_DEFAULT) <= 0) {
        if (param_owners_[param_id_vecs_[layer_id][j]] != -1) continue;  // shared: fine
        H5Gclose(layer_group);
        CREMA_THROW_CONFIG(path, ": layer \"", name, "\": param ", j, " is missing");
      }
      try {
        ReadBlobFromHDF5(layer_group, dataset, target_blobs[j].get(), false);
      } catch (const ConfigError& e) {
        H5Gclose(layer_group);
        CREMA_THROW_CONFIG(path, ": layer \"", name, "\" param ", j, ": ", e.what());
      }
    }
    H5Gclose(layer_group);
    if (!target_blobs.empty()) result.copied.push_back(name);
  }
  H5Gclose(data);
  return result;
#endif
}

void Net::ToProto(NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (const auto& layer : layers_) layer->ToProto(param->add_layer(), write_diff);
}

void Net::ToHDF5(const std::string& path, bool write_diff) const {
#ifdef CREMA_NO_HDF5
  CREMA_THROW_RUNTIME(path, ": writing HDF5 weights needs a crema build with HDF5; this ",
                      "inference-only build writes binary .caffemodel files");
#else
  Hdf5File file(path, Hdf5File::Mode::kCreate);
  hid_t data = file.CreateGroup("data");
  hid_t diff = write_diff ? file.CreateGroup("diff") : -1;
  for (int layer_id = 0; layer_id < num_layers(); ++layer_id) {
    const std::string& name = layer_names_[layer_id];
    hid_t layer_data = H5Gcreate2(data, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t layer_diff =
        write_diff ? H5Gcreate2(diff, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (layer_data < 0 || (write_diff && layer_diff < 0))
      CREMA_THROW_RUNTIME(path, ": cannot create the group for layer \"", name, "\"");
    for (size_t j = 0; j < param_id_vecs_[layer_id].size(); ++j) {
      const int net_param_id = param_id_vecs_[layer_id][j];
      const std::string dataset = std::to_string(j);
      // Shared parameters are saved once, by their owner.
      if (param_owners_[net_param_id] == -1)
        WriteBlobToHDF5(layer_data, dataset, *params_[net_param_id], false);
      if (write_diff) WriteBlobToHDF5(layer_diff, dataset, *params_[net_param_id], true);
    }
    H5Gclose(layer_data);
    if (write_diff) H5Gclose(layer_diff);
  }
  H5Gclose(data);
  if (write_diff) H5Gclose(diff);
#endif
}

BlobPtr Net::blob_by_name(const std::string& name) const {
  auto it = blob_names_index_.find(name);
  return it == blob_names_index_.end() ? nullptr : blobs_[it->second];
}

Layer* Net::layer_by_name(const std::string& name) const {
  auto it = layer_names_index_.find(name);
  return it == layer_names_index_.end() ? nullptr : layers_[it->second].get();
}

int Net::layer_index(const std::string& name) const {
  auto it = layer_names_index_.find(name);
  return it == layer_names_index_.end() ? -1 : it->second;
}

}  // namespace crema
