#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// A lookup table: each element of the bottom is an integer index i in [0, input_dim) and the top
// gets row i of the weights W (input_dim, num_output), plus the bias b (num_output) when
// bias_term. Shapes: bottom (any, M elements) -> top (bottom shape..., num_output).
// Backward: dW[i] += dy for every element that held i; db += sum of dy; no gradient to the
// indices (AllowForceBackward false). A non-integer or out-of-range index is a RuntimeError.
// Params: embed_param { num_output (> 0), input_dim (> 0), bias_term (default true),
// weight_filler, bias_filler }. Param diffs accumulate. Not in-place.
class EmbedLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Embed"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const Blob& bottom, Blob* top);
  template <typename T>
  void Backward(const Blob& top, const Blob& bottom);
  // Reads and checks the indices of the bottom into indices_.
  void ReadIndices(const Blob& bottom);

  int num_output_ = 0;  // N
  int input_dim_ = 0;   // K
  bool bias_term_ = true;
  std::vector<int> indices_;
#ifdef CREMA_WITH_CUDA
  // For the GPU weight diff: the rows used, with the bottom positions that hold each (CSR).
  Blob gpu_rows_{DataType::kFloat64};
#endif

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
