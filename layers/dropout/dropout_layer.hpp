#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Dropout with ratio p. TRAIN: mask ~ Bernoulli(1 - p) per element (a fresh mask every Forward,
// from the thread's generator), y = x * mask * scale, dx = dy * mask * scale, with scale =
// 1 / (1 - p). TEST: y = x, dx = dy. With scale_train false (a field of Caffe forks, field 2),
// TRAIN uses scale 1 and TEST scales by (1 - p) instead. Any shape; in-place
// safe. Params: dropout_param { dropout_ratio (default 0.5, in [0, 1)), scale_train (default
// true) }.
class DropoutLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Dropout"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  // The mask of the last TRAIN Forward (1 keeps an element).
  const std::vector<unsigned int>& mask() const { return mask_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Apply(int64_t count, const T* x, T* y) const;

  double threshold_ = 0.5;  // the dropout ratio p
  double scale_ = 2.0;      // 1 / (1 - p)
  bool scale_train_ = true;
  std::vector<unsigned int> mask_;
  // GPU: the same mask (drawn on the host, so CPU and GPU nets drop the same units) as 0/1.
  Blob mask_gpu_;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
