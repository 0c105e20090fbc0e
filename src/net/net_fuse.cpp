// Fusing in-place ReLUs into the layer that produced their input (NetOptions::fuse_relu,
// src/net/README.md). The producer applies the ReLU in its own last pass over its output, so the
// ReLU's separate pass over memory disappears; the ReLU's Backward reads the ReLU's output in
// place, which the fused producer leaves identical. On CPU nets that Backward in turn runs inside
// the one layer reading the ReLU's output where that layer can take it (PlanFuseReLUBackward).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "crema/net.hpp"
#include "layers/batch_norm/batch_norm_layer.hpp"
#include "layers/convolution/convolution_layer.hpp"
#include "layers/scale/scale_layer.hpp"
#include "math/dnnl_engine.hpp"
#include "math/pointwise_depthwise.hpp"
#include "net/memory_plan.hpp"

namespace crema {
namespace {

std::atomic<bool> g_fuse_relu_default{true};
std::atomic<bool> g_fuse_batch_norm_default{true};
std::atomic<bool> g_fuse_sum_default{true};
std::atomic<bool> g_fuse_depthwise_default{true};

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

void SetFuseReLUDefault(bool fuse) { g_fuse_relu_default.store(fuse); }
bool FuseReLUDefault() { return g_fuse_relu_default.load(); }
void SetFuseBatchNormDefault(bool fuse) { g_fuse_batch_norm_default.store(fuse); }
bool FuseBatchNormDefault() { return g_fuse_batch_norm_default.load(); }
void SetFuseSumDefault(bool fuse) { g_fuse_sum_default.store(fuse); }
bool FuseSumDefault() { return g_fuse_sum_default.load(); }
void SetFuseDepthwiseDefault(bool fuse) { g_fuse_depthwise_default.store(fuse); }
bool FuseDepthwiseDefault() { return g_fuse_depthwise_default.load(); }

void Net::SetFuseReLU(bool fuse) {
  fuse_relu_ = fuse;
  PlanFuseReLU();
}

void Net::SetFuseBatchNorm(bool fuse) {
  fuse_batch_norm_ = fuse;
  PlanBatchNormGroups();
}

int Net::InPlaceReLUBlob(int layer_id) const {
  if (std::string(layers_[layer_id]->type()) != "ReLU" || bottom_id_vecs_[layer_id].size() != 1 ||
      top_id_vecs_[layer_id].size() != 1 ||
      bottom_id_vecs_[layer_id][0] != top_id_vecs_[layer_id][0])
    return -1;
  const int blob = top_id_vecs_[layer_id][0];
  return blob_loss_weights_[blob] == 0 ? blob : -1;
}

void Net::PlanFuseReLU() {
  relu_fused_into_.assign(num_layers(), -1);
  fused_relu_of_.assign(num_layers(), -1);
  for (auto& layer : layers_) layer->set_fused_relu(false);
  for (auto& layer : folded_convs_)
    if (layer) layer->set_fused_relu(false);
  if (!fuse_relu_) {
    PlanBatchNormGroups();
    PlanFuseSum();
    PlanFuseDepthwise();
    return PlanFuseReLUBackward();
  }
  for (int l = 0; l < num_layers(); ++l) {
    const int blob = InPlaceReLUBlob(l);
    if (blob < 0) continue;
    // The last layer before the ReLU that writes the blob, passing over in-place layers folded
    // into a convolution (they do not run); any other layer reading the blob in between would
    // see the value before the ReLU, so then there is no fusion.
    int producer = -1;
    for (int j = l - 1; j >= 0; --j) {
      const bool writes = Contains(top_id_vecs_[j], blob);
      const bool reads = Contains(bottom_id_vecs_[j], blob);
      if (folded_into_[j] >= 0) {
        if ((!writes && !reads) || (writes && bottom_id_vecs_[j] == top_id_vecs_[j])) continue;
        break;
      }
      if (writes) {
        producer = j;
        break;
      }
      if (reads) break;
    }
    if (producer < 0 || top_id_vecs_[producer].size() != 1 ||
        !layers_[producer]->SupportsFusedReLU() || fused_relu_of_[producer] >= 0)
      continue;
    relu_fused_into_[l] = producer;
    fused_relu_of_[producer] = l;
  }
  // Groups take the ReLU fused into their Scale.
  PlanBatchNormGroups();
  PlanFuseSum();
  PlanFuseDepthwise();
  PlanFuseReLUBackward();
}

// An in-place ReLU whose output one later layer alone reads (the net's Split layers see to
// that where several read it), a layer that can compute the ReLU's gradient as it writes its
// bottom's: that reader's Backward does it, and the ReLU's Backward is skipped. The result is
// the same bits: the reader applies the ReLU's expression to each gradient element it wrote,
// reading the same ReLU output the ReLU's Backward would.
void Net::PlanFuseReLUBackward() {
  relu_backward_of_.assign(num_layers(), {});
  relu_backward_fused_into_.assign(num_layers(), -1);
  if (!fuse_relu_ || !device_.is_cpu() || amp_ != Amp::kOff) return;
  for (int l = 0; l < num_layers(); ++l) {
    const int blob = InPlaceReLUBlob(l);
    if (blob < 0) continue;
    const int reader = SoleReader(l, blob);
    if (reader < 0 || Contains(top_id_vecs_[reader], blob) ||
        !layers_[reader]->SupportsFusedReLUBackward())
      continue;
    const auto& bottoms = bottom_id_vecs_[reader];
    const int k =
        static_cast<int>(std::find(bottoms.begin(), bottoms.end(), blob) - bottoms.begin());
    relu_backward_of_[reader].push_back({k, l});
    relu_backward_fused_into_[l] = reader;
  }
}

bool Net::PrepareFusedReLUBackward(int layer_id, int end) {
  if (relu_backward_of_[layer_id].empty() || check_finite_ || debug_info_) return false;
  std::vector<float> slopes(bottom_id_vecs_[layer_id].size(), std::nanf(""));
  bool any = false;
  for (const auto& [k, relu] : relu_backward_of_[layer_id]) {
    // The ReLU's Backward would run in this pass, on the gradient this layer writes.
    if (relu < end || !layer_need_backward_[relu] || !bottom_need_backward_[relu][0] ||
        !bottom_need_backward_[layer_id][k])
      continue;
    slopes[k] = layers_[relu]->layer_param().relu_param().negative_slope();
    any = true;
  }
  if (any) layers_[layer_id]->set_fused_relu_backward(std::move(slopes));
  return any;
}

void Net::AfterFusedReLUBackward(int layer_id) {
  Layer* layer = layers_[layer_id].get();
  for (const auto& [k, relu] : relu_backward_of_[layer_id])
    if (layer->fused_relu_backward_taken(k)) backward_done_[relu] = 1;
  layer->set_fused_relu_backward({});
}

void Net::SetFusedSgdSteps(const std::vector<Layer::SgdStep>& steps) {
  CREMA_ASSERT(steps.size() == learnable_params_.size(), steps.size());
  if (device_.is_cuda() || debug_info_ || check_finite_) return;
  // How many entries of params() each learnable param has (more than one: shared).
  std::vector<int> uses(learnable_params_.size(), 0);
  for (int id : learnable_param_ids_) ++uses[id];
  std::vector<std::vector<Layer::SgdStep>> per_layer(layers_.size());
  bool any = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int id = learnable_param_ids_[i];
    const auto [layer, param] = param_layer_indices_[i];
    if (!steps[id].history || uses[id] != 1 || !layers_[layer]->SupportsFusedSgdStep(param))
      continue;
    per_layer[layer].resize(layers_[layer]->blobs().size());
    per_layer[layer][param] = steps[id];
    any = true;
  }
  if (!any) return;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (!per_layer[l].empty()) layers_[l]->set_fused_sgd_steps(std::move(per_layer[l]));
}

std::vector<char> Net::FusedSgdStepsTaken() {
  std::vector<char> taken(learnable_params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto [layer, param] = param_layer_indices_[i];
    if (layers_[layer]->fused_sgd_step_taken(param)) taken[learnable_param_ids_[i]] = 1;
  }
  for (const auto& layer : layers_) layer->set_fused_sgd_steps({});
  return taken;
}

void Net::SetFuseSum(bool fuse) {
  fuse_sum_ = fuse;
  PlanFuseSum();
}

// An Eltwise SUM of ones of two bottoms (s, x) that the inference plan runs in place over s,
// where x is written by a Convolution (no ReLU fused into it) and read by nothing but the Eltwise,
// and nothing between the two touches s or x: the convolution computes s + conv (+ the Eltwise's
// fused ReLU) into s's memory with oneDNN's post-ops, and the Eltwise is skipped.
void Net::PlanFuseSum() {
  sum_fused_into_.assign(num_layers(), -1);
  fused_sum_of_.assign(num_layers(), -1);
  sum_ran_fused_.assign(num_layers(), 0);
  if (!fuse_sum_ || !memory_layout_ || memory_plan_ != MemoryPlan::kInference ||
      !device_.is_cpu() || amp_ != Amp::kOff || !DnnlBuilt())
    return;
  const std::vector<int>& in_place = memory_layout_->in_place_layers;
  for (int e = 0; e < num_layers(); ++e) {
    if (std::string(layers_[e]->type()) != "Eltwise" || bottom_id_vecs_[e].size() != 2 ||
        top_id_vecs_[e].size() != 1 || !layers_[e]->AllowsInPlaceOnFirstBottom() ||
        !Contains(in_place, e))
      continue;
    const int s = bottom_id_vecs_[e][0], x = bottom_id_vecs_[e][1];
    if (s == x || !memory_layout_->blobs[x].data_note.empty()) continue;
    // The blobs sharing s's memory (Split tops, in-place layers): the convolution overwrites them.
    std::vector<int> s_memory = {s};
    for (const MemoryPlanLayout::Group& group : memory_layout_->data_groups)
      if (Contains(group.blobs, s)) s_memory = group.blobs;
    const auto touches = [&](const std::vector<int>& ids, int blob) {
      if (blob == x) return Contains(ids, x);
      for (int b : s_memory)
        if (Contains(ids, b)) return true;
      return false;
    };
    // x's producer: the last layer before e writing it that runs (folded layers do not); no
    // layer in between may read x or touch s's memory.
    int producer = -1;
    for (int j = e - 1; j >= 0; --j) {
      if (folded_into_[j] >= 0) continue;
      if (Contains(top_id_vecs_[j], x)) {
        producer = j;
        break;
      }
      if (touches(bottom_id_vecs_[j], x) || touches(bottom_id_vecs_[j], s) ||
          touches(top_id_vecs_[j], s))
        break;
    }
    if (producer < 0 || std::string(layers_[producer]->type()) != "Convolution" ||
        top_id_vecs_[producer].size() != 1 || bottom_id_vecs_[producer].size() != 1 ||
        fused_relu_of_[producer] >= 0 || touches(bottom_id_vecs_[producer], s))
      continue;
    // Nothing but e reads the value the producer writes into x.
    bool only_e = true;
    for (int l = producer + 1; l < num_layers() && only_e; ++l) {
      if (l == e || folded_into_[l] >= 0) continue;
      if (Contains(bottom_id_vecs_[l], x)) only_e = false;
      if (Contains(top_id_vecs_[l], x)) break;
    }
    if (!only_e) continue;
    sum_fused_into_[e] = producer;
    fused_sum_of_[producer] = e;
  }
}

void Net::PrepareFusedSum(int conv_id, int end, Layer* layer) {
  const int e = fused_sum_of_[conv_id];
  sum_ran_fused_[e] = 0;
  auto* conv = dynamic_cast<ConvolutionLayer*>(layer);
  if (conv == nullptr) return;
  Blob* s = layer_bottoms_[e][0];
  Blob* target = layer_tops_[e][0];
  // The plan's in-place run (its memory may have moved since), oneDNN running the convolution
  // now, and no per-layer checks that would read the convolution's own top.
  const bool fuse = e <= end && target->data() != nullptr && target->data() == s->data() &&
                    !check_finite_ && !debug_info_ &&
                    conv->NextForwardRunsDnnl(layer_bottoms_[conv_id], layer_tops_[conv_id]);
  const int relu = fused_relu_of_[e];
  const float slope = relu >= 0 ? layers_[relu]->layer_param().relu_param().negative_slope() : 0.f;
  conv->set_fused_sum(fuse ? target : nullptr, fuse && relu >= 0 && relu <= end ? &slope : nullptr);
}

void Net::AfterFusedSum(int conv_id, Layer* layer) {
  auto* conv = dynamic_cast<ConvolutionLayer*>(layer);
  if (conv == nullptr) return;
  sum_ran_fused_[fused_sum_of_[conv_id]] = conv->fused_sum_ran();
  conv->set_fused_sum(nullptr);
}

void Net::SetFuseDepthwise(bool fuse) {
  fuse_depthwise_ = fuse;
  // The memory plan keeps a fused depthwise layer's top apart from the 1x1 convolution's input.
  if (memory_plan_ != MemoryPlan::kOff)
    SetMemoryPlan(memory_plan_, keep_blobs_);
  else
    PlanFuseDepthwise();
}

// A 3x3 depthwise Convolution d (one bottom x, one top) under a CPU inference plan with oneDNN on
// 16-channel blocks, where x is written by a 1x1 Convolution p and read by nothing but d (the
// layers in between that touch x run inside p: BatchNorm/Scale folded into it, its fused ReLU),
// x is no output, loss or kept blob, and the pair is one cpu::PointwiseDepthwiseForward computes
// and gains from at the current shapes: p computes d's output and d is skipped.
void Net::PlanFuseDepthwise() {
  depthwise_fused_into_.assign(num_layers(), -1);
  fused_depthwise_of_.assign(num_layers(), -1);
  depthwise_ran_fused_.assign(num_layers(), 0);
  if (!fuse_depthwise_ || memory_plan_ != MemoryPlan::kInference || !device_.is_cpu() ||
      amp_ != Amp::kOff || !DnnlBuilt() || !channel_blocked_ || ChannelBlock() != 16)
    return;
  const std::vector<int>& outputs = output_blob_indices();
  for (int d = 0; d < num_layers(); ++d) {
    const auto* dw = dynamic_cast<const ConvolutionLayer*>(layers_[d].get());
    if (dw == nullptr || bottom_id_vecs_[d].size() != 1 || top_id_vecs_[d].size() != 1 ||
        bottom_id_vecs_[d] == top_id_vecs_[d])
      continue;
    const int x = bottom_id_vecs_[d][0];
    if (blob_loss_weights_[x] != 0 || Contains(outputs, x) ||
        std::find(keep_blobs_.begin(), keep_blobs_.end(), blob_names_[x]) != keep_blobs_.end())
      continue;
    // x's producer: the last layer before d touching x that runs on it (not folded, not a fused
    // ReLU); it must write x without reading it.
    int p = -1;
    for (int j = d - 1; j >= 0; --j) {
      const bool writes = Contains(top_id_vecs_[j], x), reads = Contains(bottom_id_vecs_[j], x);
      if (!writes && !reads) continue;
      if ((folded_into_[j] >= 0 || relu_fused_into_[j] >= 0) && writes && reads) continue;
      if (writes && !reads) p = j;
      break;
    }
    if (p < 0 || bottom_id_vecs_[p].size() != 1 || top_id_vecs_[p].size() != 1) continue;
    const auto* pw = dynamic_cast<const ConvolutionLayer*>(layers_[p].get());
    if (pw == nullptr) continue;
    // Nothing after d reads x until it is written again.
    bool only_d = true;
    for (int l = d + 1; l < num_layers() && only_d; ++l) {
      if (Contains(bottom_id_vecs_[l], x)) only_d = false;
      if (Contains(top_id_vecs_[l], x)) break;
    }
    cpu::PointwiseDepthwiseShape shape;
    if (!only_d || !pw->PointwiseDepthwiseWith(*dw, *blobs_[bottom_id_vecs_[p][0]], &shape) ||
        !cpu::PointwiseDepthwiseGains(shape))
      continue;
    depthwise_fused_into_[d] = p;
    fused_depthwise_of_[p] = d;
  }
}

void Net::PrepareFusedDepthwise(int conv_id, int end, Layer* layer) {
  const int d = fused_depthwise_of_[conv_id];
  depthwise_ran_fused_[d] = 0;
  auto* pw = dynamic_cast<ConvolutionLayer*>(layer);
  auto* dw = dynamic_cast<ConvolutionLayer*>(forward_layer(d));
  if (pw == nullptr || dw == nullptr) return;
  const Blob& input = *layer_bottoms_[conv_id][0];
  Blob* target = layer_tops_[d][0];
  // Both layers on oneDNN by a decision made (no race timed with the other's work in it), the
  // input blocked by 16 as the 1x1 convolution reads it, the depthwise layer's top one it would
  // write blocked, apart from the input (the plan keeps them apart; a re-plan may not have run
  // yet), and no per-layer checks that would read the 1x1 convolution's own top.
  const auto bytes = [](const Blob& b) { return static_cast<size_t>(b.count()) * sizeof(float); };
  const auto* in = input.data() ? reinterpret_cast<const char*>(input.cpu_data<float>()) : nullptr;
  const auto* out =
      target->data() ? reinterpret_cast<const char*>(target->cpu_data<float>()) : nullptr;
  const bool apart =
      in != nullptr && out != nullptr && (in + bytes(input) <= out || out + bytes(*target) <= in);
  const bool fuse = d <= end && apart && !check_finite_ && !debug_info_ &&
                    input.cpu_channel_block() == 16 && target->channel_block_allowed() &&
                    ChannelBlockable(target->shape()) &&
                    pw->ForwardDecidedDnnl(layer_bottoms_[conv_id], layer_tops_[conv_id]) &&
                    dw->ForwardDecidedDnnl(layer_bottoms_[d], layer_tops_[d]);
  const int relu = fused_relu_of_[d];
  const float slope = relu >= 0 ? layers_[relu]->layer_param().relu_param().negative_slope() : 0.f;
  pw->set_fused_depthwise(fuse ? dw : nullptr, target,
                          fuse && relu >= 0 && relu <= end ? &slope : nullptr);
}

void Net::AfterFusedDepthwise(int conv_id, Layer* layer) {
  auto* conv = dynamic_cast<ConvolutionLayer*>(layer);
  if (conv == nullptr) return;
  depthwise_ran_fused_[fused_depthwise_of_[conv_id]] = conv->fused_depthwise_ran();
  conv->set_fused_depthwise(nullptr);
}

void Net::PlanBatchNormGroups() {
  for (int l = 0; l < static_cast<int>(group_scale_of_.size()); ++l)
    if (group_scale_of_[l] >= 0) {
      static_cast<BatchNormLayer*>(layers_[l].get())->set_keep_x_norm(false);
      static_cast<BatchNormLayer*>(layers_[l].get())->set_fused_scale(nullptr, false, 0);
      static_cast<ScaleLayer*>(layers_[group_scale_of_[l]].get())->set_bottom_kept_by(nullptr);
    }
  group_scale_of_.assign(num_layers(), -1);
  fused_into_batch_norm_.assign(num_layers(), -1);
  if (!fuse_batch_norm_) return;
  for (int l = 0; l < num_layers(); ++l) {
    auto* bn = dynamic_cast<BatchNormLayer*>(layers_[l].get());
    if (bn == nullptr || folded_into_[l] >= 0 || bottom_id_vecs_[l].size() != 1 ||
        top_id_vecs_[l].size() != 1)
      continue;
    const int blob = top_id_vecs_[l][0];
    if (blob_loss_weights_[blob] != 0) continue;
    // The next layer touching the blob: an in-place per-channel Scale of it.
    int next = l + 1;
    while (next < num_layers() && !Contains(bottom_id_vecs_[next], blob) &&
           !Contains(top_id_vecs_[next], blob))
      ++next;
    if (next == num_layers()) continue;
    auto* scale = dynamic_cast<ScaleLayer*>(layers_[next].get());
    if (scale == nullptr || folded_into_[next] >= 0 ||
        bottom_id_vecs_[next] != top_id_vecs_[next] ||
        bottom_id_vecs_[next] != std::vector<int>{blob} || !scale->IsPerChannel() ||
        scale->dtype() != bn->dtype())
      continue;
    group_scale_of_[l] = next;
    fused_into_batch_norm_[next] = l;
    if (fused_relu_of_[next] >= 0) fused_into_batch_norm_[fused_relu_of_[next]] = l;
    bn->set_keep_x_norm(true);
  }
}

}  // namespace crema

namespace crema {

int Net::FusedBackwardGroup(int i, int start, int end) const {
  const int bn = fused_into_batch_norm_[i];
  if (bn < 0 || check_finite_ || debug_info_ || bn < end) return -1;
  const auto* batch_norm = static_cast<const BatchNormLayer*>(layers_[bn].get());
  if (!batch_norm->ran_fused()) return -1;
  const int scale = group_scale_of_[bn];
  const int relu = batch_norm->ran_fused_relu() ? fused_relu_of_[scale] : -1;
  // Layer i must be the group's last layer, and the layers' backward needs those of a plain
  // chain: each passes a gradient down to the one below.
  if (i != (relu >= 0 ? relu : scale) || i > start || !layer_need_backward_[scale]) return -1;
  if (relu >= 0 && (!layer_need_backward_[relu] || !bottom_need_backward_[relu][0])) return -1;
  const bool bn_down = layer_need_backward_[bn] && bottom_need_backward_[bn][0];
  if (bottom_need_backward_[scale][0] != bn_down) return -1;
  return bn;
}

}  // namespace crema
