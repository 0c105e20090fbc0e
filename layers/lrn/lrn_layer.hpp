#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Local response normalisation, as Caffe. Bottom (N, C, H, W); top the same shape:
//   y = x * s^-beta, with n = local_size (odd) and the window W(c, h, w) centred on the element:
//   ACROSS_CHANNELS: s = k + alpha / n   * sum of x^2 over channels c - (n-1)/2 .. c + (n-1)/2
//   WITHIN_CHANNEL:  s = 1 + alpha / n^2 * sum of x^2 over the n x n spatial square around (h, w)
// (cells outside the blob count as 0). WITHIN_CHANNEL ignores k and always divides by n^2, as
// Caffe's composition of Split, Power, AVE Pooling (pad (n-1)/2) and Eltwise PROD does.
// Backward (exact): dx_i = dy_i * s_i^-beta - 2 * alpha * beta / norm * x_i * sum over the window
// around i of dy_j * y_j / s_j, norm = n or n^2. Not in-place.
// Params: lrn_param { local_size (5), alpha (1), beta (0.75), norm_region (ACROSS_CHANNELS),
// k (1) }.
class LRNLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LRN"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // WITHIN_CHANNEL: out = the spatial window sums of `in` for one image (C x H x W).
  template <typename T>
  void WindowSum(const T* in, T* out) const;
  // ACROSS_CHANNELS, in parallel over (image, chunk of positions).
  template <typename T>
  void ForwardAcross(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardAcross(const Blob& top, Blob* bottom);
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  bool across_channels_ = true;
  int size_ = 5;
  double alpha_ = 1, beta_ = 0.75, k_ = 1;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob scale_;   // s, from the last Forward (not written when forward_only())
  Blob buffer_;  // WITHIN_CHANNEL: one image of squares or ratios
  Blob sums_;    // WITHIN_CHANNEL: one image of window sums

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
