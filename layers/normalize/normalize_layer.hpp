#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// L2 normalization with a learned scale, as SSD's Normalize. The bottom is (N, C, spatial...)
// with at least 2 axes; S = the product of the axes after C. With across_spatial, each item n
// has one norm over its C*S values: norm_n = sqrt(sum x^2 + eps); otherwise each position
// (n, s) has one over the channels: norm_ns = sqrt(sum_c x_ncs^2 + eps). Then
// top = scale_c * x / norm (scale_0 for all channels with channel_shared). Top has the bottom's
// shape. Backward, with g = dtop * scale and the sums over the values sharing a norm:
//   dx = (g - x * sum(x * g) / norm^2) / norm;  dscale_c += sum over channel c of dtop * x / norm.
// With one scale per channel this is the true gradient; SSD's Backward applies the scale after
// the sum (s_c (dtop - x sum(x * dtop) / norm^2) / norm), which is right only for a shared scale.
// Learnable blob: the scale, shape () with channel_shared, else (C). Not in-place.
// Params: norm_param { across_spatial (default true), channel_shared (default true),
// scale_filler (default constant 1), eps (default 1e-10) }.
class NormalizeLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Normalize"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, bool propagate_down, Blob* bottom);

  bool across_spatial_ = true;
  bool channel_shared_ = true;
  double eps_ = 1e-10;
  Blob norm_;  // (N) across_spatial, else (N, S): the norms of the last Forward
  // GPU: an element-wise product to sum, and its sums per norm (the shape of norm_).
  Blob buffer_;
  Blob dot_;

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
