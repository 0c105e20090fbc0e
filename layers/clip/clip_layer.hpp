#pragma once
#include "crema/layer.hpp"
#include "crema/saved_input.hpp"

namespace crema {

// y = max(min, min(x, max)), as Caffe; any shape; in-place safe (the bottom is copied).
// dy/dx = 1 for min <= x <= max (both ends included, as Caffe), else 0.
// Params: clip_param { min, max } (both required; min <= max).
class ClipLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Clip"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  SavedInput input_;  // x, kept for Backward when running in place

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
