// Fusing in-place ReLUs into the layer that produced their input (NetOptions::fuse_relu,
// src/net/README.md). The producer applies the ReLU in its own last pass over its output, so the
// ReLU's separate pass over memory disappears; the ReLU's Backward runs as before (in place it
// reads the ReLU's output, which the fused producer leaves identical).
#include <algorithm>
#include <atomic>
#include <string>

#include "crema/net.hpp"
#include "layers/batch_norm/batch_norm_layer.hpp"
#include "layers/scale/scale_layer.hpp"

namespace crema {
namespace {

std::atomic<bool> g_fuse_relu_default{true};
std::atomic<bool> g_fuse_batch_norm_default{true};

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

void SetFuseReLUDefault(bool fuse) { g_fuse_relu_default.store(fuse); }
bool FuseReLUDefault() { return g_fuse_relu_default.load(); }
void SetFuseBatchNormDefault(bool fuse) { g_fuse_batch_norm_default.store(fuse); }
bool FuseBatchNormDefault() { return g_fuse_batch_norm_default.load(); }

void Net::SetFuseReLU(bool fuse) {
  fuse_relu_ = fuse;
  PlanFuseReLU();
}

void Net::SetFuseBatchNorm(bool fuse) {
  fuse_batch_norm_ = fuse;
  PlanBatchNormGroups();
}

void Net::PlanFuseReLU() {
  relu_fused_into_.assign(num_layers(), -1);
  fused_relu_of_.assign(num_layers(), -1);
  for (auto& layer : layers_) layer->set_fused_relu(false);
  for (auto& layer : folded_convs_)
    if (layer) layer->set_fused_relu(false);
  if (!fuse_relu_) return PlanBatchNormGroups();
  for (int l = 0; l < num_layers(); ++l) {
    if (std::string(layers_[l]->type()) != "ReLU" || bottom_id_vecs_[l].size() != 1 ||
        top_id_vecs_[l].size() != 1 || bottom_id_vecs_[l][0] != top_id_vecs_[l][0])
      continue;
    const int blob = top_id_vecs_[l][0];
    if (blob_loss_weights_[blob] != 0) continue;
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
  if (bn < 0 || !device_.is_cuda() || check_finite_ || debug_info_ || bn < end) return -1;
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
