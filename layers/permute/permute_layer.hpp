#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Reorders the axes of the bottom, as SSD's Permute: top axis i is bottom axis order[i], so
// top[i_0, ..., i_{n-1}] = bottom[j] with j_{order[k]} = i_k. permute_param.order lists the first
// new axes; the axes it leaves out follow in their original order (no order: a plain copy).
// Top shape: bottom.shape(order[i]). Backward scatters the top diff back through the inverse
// permutation. Not in-place.
// Params: permute_param { order (repeated; each < the bottom's axis count, no duplicates) }.
class PermuteLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Permute"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // Copies between the bottom layout and the top layout: to_top reads bottom-ordered src and
  // writes top-ordered dst; otherwise the reverse.
  template <typename T>
  void Permute(const T* src, T* dst, bool to_top) const;

  std::vector<int> order_;          // top axis i is bottom axis order_[i]
  std::vector<int64_t> old_steps_;  // bottom strides
  std::vector<int64_t> new_steps_;  // top strides
  int64_t count_ = 0;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
