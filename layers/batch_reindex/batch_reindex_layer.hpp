#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Selects and reorders items of the batch: top[i] = bottom[0][index[i]] along axis 0, with
// index = bottom[1], a 1-D blob of K integer values in [0, N) (repeats allowed; read as Caffe,
// truncated toward zero). Top shape (K, bottom[0] shape[1:]). Backward accumulates:
// dbottom[0][n] = sum over i with index[i] = n of dtop[i] (zero for items not picked); no
// gradient to the indices. An index outside [0, N) is a RuntimeError. Not in-place. No params.
class BatchReindexLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchReindex"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, const BlobVec& bottom) const;
  // The indices as integers; RuntimeError for one outside [0, N).
  std::vector<int64_t> Indices(const Blob& index, int num) const;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
