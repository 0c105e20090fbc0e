#pragma once
#include <vector>

#include "crema/layer.hpp"
#include "math/resize.hpp"
#include "math/resize_gpu.hpp"

namespace crema {

// PSPNet/DeepLab's Interp: bilinear resize with aligned corners of the last two axes (H, W) of
// bottom[0] (..., H, W), after cropping -pad_beg rows/columns at the start and -pad_end at the
// end: the effective input is H_eff = H + pad_beg + pad_end (likewise W_eff). Output size, in
// the order PSPNet's interp_layer.cpp tries them:
//   a second bottom: its last two axes (it only gives the size and gets no gradient);
//   shrink_factor only:  H_out = (H_eff - 1) / shrink + 1;
//   zoom_factor only:    H_out = H_eff + (H_eff - 1) * (zoom - 1);
//   height and width:    H_out = height, W_out = width;
//   shrink and zoom:     shrink first, then zoom.
// top[y][x] = bilinear sample of the effective input at (y * r_h, x * r_w) with
// r = (in_eff - 1) / (out - 1) (0 when out == 1); in_eff == out copies. Backward scatters the
// top diff with the same weights; the cropped border gets zero.
// Params: interp_param { height, width, zoom_factor, shrink_factor, pad_beg, pad_end (<= 0) }.
// Not in-place.
class InterpLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Interp"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // Per output row (or column): the source index in the full input and the weight of the next.
  using Tap = cpu::ResizeTap;
  static std::vector<Tap> Taps(int crop, int in_eff, int out_size);
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

  int pad_beg_ = 0;
  int pad_end_ = 0;
#ifdef CREMA_WITH_CUDA
  gpu::ResizeTable gpu_table_;  // the taps on the device
#endif

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
