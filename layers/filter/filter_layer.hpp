#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Keeps the items (along axis 0) whose selector is non-zero: the last bottom is the selector,
// shape (N) or (N, 1, ...); bottoms 0 .. K-1 (each with N items) map to tops 0 .. K-1 holding
// the selected items in order, so the top batch size varies with the data. As Caffe, the first
// Reshape (at set-up, before any data) gives the tops the full batch N. Backward copies each
// top diff to its item and zeroes the diffs of items that were filtered out; no gradient to the
// selector. No params. Not in-place.
class FilterLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Filter"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != layer_param_.bottom_size() - 1;
  }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void Forward(const BlobVec& bottom, const BlobVec& top) const;
  template <typename T>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                const BlobVec& bottom) const;

  std::vector<int> indices_to_forward_;
  bool first_reshape_ = true;
#ifdef CREMA_WITH_CUDA
  // indices_to_forward_ on the device, uploaded when they change (`uploaded_` is the last copy).
  Blob gpu_indices_{DataType::kFloat64};
  std::vector<int> uploaded_;
  const double* GpuIndices();
#endif

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
