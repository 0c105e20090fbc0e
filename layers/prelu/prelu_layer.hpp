#pragma once
#include "crema/layer.hpp"
#include "crema/saved_input.hpp"

namespace crema {

// Parametric ReLU, as Caffe: y = max(0, x) + a_c * min(0, x), with c the channel (axis 1) of
// each element; bottom has >= 2 axes, top has its shape. Learnable blob: the slopes a, shape
// (C), or shape () holding one slope for all channels with channel_shared.
// dy/dx = 1 for x > 0, a_c for x <= 0; dL/da_c += sum over channel c of dy * x * (x <= 0)
// (param diffs accumulate; the sum is taken in double, on the CPU and the GPU). In place, the
// bottom is copied before Forward, as in Caffe. Params: prelu_param { filler (default constant
// 0.25), channel_shared (default false) }.
class PReLULayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "PReLU"; }
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
  void BackwardT(const Blob& top, bool propagate_down, Blob* bottom);

  bool channel_shared_ = false;
  SavedInput input_;  // x, kept for Backward when running in place
  Blob slope_term_;   // GPU: x where x <= 0, else 0, for the slope gradient

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
