#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Crops bottom[0] to the shape of bottom[1] on the axes from crop_param.axis on:
// top[..., i, ...] = bottom[0][..., i + offset_a, ...] on each cropped axis a; the axes before
// axis keep bottom[0]'s size. Top shape: bottom[0]'s before axis, bottom[1]'s from axis on.
// Backward: dbottom[0] is dtop in the cropped window and zero elsewhere; bottom[1] only gives
// the shape and gets no gradient (a zero diff when one is asked for).
// Params: crop_param { axis (default 2, negative counts from the end), offset (repeated: none
// = 0, one for every cropped axis, or one per cropped axis) }. offset + the size of bottom[1]
// must fit in bottom[0] on each cropped axis. Not in-place.
class CropLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Crop"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // Copies the cropped window between the bottom (big) and the top (small) blob.
  template <typename T>
  void CopyWindow(const T* src, T* dst, bool to_top, const Blob& big, const Blob& small) const;

  std::vector<int> offsets_;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
