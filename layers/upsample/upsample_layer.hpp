#pragma once
#include <vector>

#include "crema/layer.hpp"
#include "math/resize.hpp"
#include "math/resize_gpu.hpp"

namespace crema {

// Resizes the last two axes (H, W) of bottom (..., H, W) to top (..., H_out, W_out); the axes
// before are independent planes. Output size: upsample_h x upsample_w when given (both), else
// H * scale_h x W * scale_w (scale_h/scale_w given together, or both from scale, default 2).
// NEAREST (PyTorch 'nearest'): top[y][x] = bottom[floor(y * H / H_out)][floor(x * W / W_out)].
// BILINEAR: top[y][x] interpolates the 2x2 neighbours of the source point (sy, sx):
//   align_corners false (PyTorch's half-pixel mapping): sy = max(0, (y + 0.5) * H / H_out - 0.5);
//   align_corners true: sy = y * (H - 1) / (H_out - 1) (0 when H_out == 1); likewise sx.
// Backward scatters each top diff onto the bottom pixels it read, with the same weights.
// Params: upsample_param { scale, scale_h, scale_w, upsample_h, upsample_w, mode (NEAREST |
// BILINEAR), align_corners (BILINEAR only) }. Not in-place.
class UpsampleLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Upsample"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // Per output row (or column): the two source indices and the weight of the second.
  using Tap = cpu::ResizeTap;
  std::vector<Tap> Taps(int in_size, int out_size) const;
  template <typename T>
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;

  bool bilinear_ = false;
  bool align_corners_ = false;
  int scale_h_ = 2;
  int scale_w_ = 2;
  int upsample_h_ = 0;  // 0: from the scale
  int upsample_w_ = 0;
#ifdef CREMA_WITH_CUDA
  gpu::ResizeTable gpu_table_;  // the taps on the device
#endif

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
