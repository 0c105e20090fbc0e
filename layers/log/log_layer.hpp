#pragma once
#include "crema/layer.hpp"
#include "crema/saved_input.hpp"

namespace crema {

// y = log_base(shift + scale * x), as Caffe; base -1 means e; any shape; in-place safe (the
// bottom is copied). dy/dx = scale / ((shift + scale * x) * ln(base)).
// Params: log_param { base (default -1 = e; else > 0 and != 1), scale (default 1),
// shift (default 0) }.
class LogLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Log"; }
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

  double base_scale_ = 1;          // 1 / ln(base)
  double backward_num_scale_ = 1;  // scale / ln(base)
  SavedInput input_;               // x, kept for Backward when running in place

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
