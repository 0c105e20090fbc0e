// Fusing in-place ReLUs into the layer that produced their input (NetOptions::fuse_relu,
// src/net/README.md). The producer applies the ReLU in its own last pass over its output, so the
// ReLU's separate pass over memory disappears; the ReLU's Backward runs as before (in place it
// reads the ReLU's output, which the fused producer leaves identical).
#include <algorithm>
#include <atomic>
#include <string>

#include "crema/net.hpp"

namespace crema {
namespace {

std::atomic<bool> g_fuse_relu_default{true};

bool Contains(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

void SetFuseReLUDefault(bool fuse) { g_fuse_relu_default.store(fuse); }
bool FuseReLUDefault() { return g_fuse_relu_default.load(); }

void Net::SetFuseReLU(bool fuse) {
  fuse_relu_ = fuse;
  PlanFuseReLU();
}

void Net::PlanFuseReLU() {
  relu_fused_into_.assign(num_layers(), -1);
  fused_relu_of_.assign(num_layers(), -1);
  for (auto& layer : layers_) layer->set_fused_relu(false);
  for (auto& layer : folded_convs_)
    if (layer) layer->set_fused_relu(false);
  // GPU layers keep their own kernels (cuDNN convolutions, ...).
  if (!fuse_relu_ || device_.is_cuda()) return;
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
}

}  // namespace crema
