#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Default (prior) boxes of SSD, one set per cell of a feature map. Bottoms: the feature map
// (..., H, W) and the image (..., img_H, img_W); only their shapes are read. Top: (1, 2, H*W*P*4),
// channel 0 the boxes [xmin, ymin, xmax, ymax] normalized by the image size, channel 1 their
// variances. Cell (h, w) is centred at ((w + offset) * step_w, (h + offset) * step_h); per cell,
// for each min_size m (truncated to an integer, as SSD): the m x m box, then the
// sqrt(m * M) square when max_size M is given (M truncated likewise), then for every aspect ratio
// r != 1 the box m*sqrt(r) wide and m/sqrt(r) high. Aspect ratios: 1, then each given r (near
// duplicates dropped) followed by 1/r when flip. P = (number of ratios) * (number of min_size)
// + (number of max_size). clip clamps the boxes to [0, 1]. No gradient (Backward leaves zero).
// Params: prior_box_param { min_size (repeated, > 0), max_size (repeated, one per min_size,
// > min_size), aspect_ratio, flip (default true), clip (default false), variance (none: 0.1;
// 1 or 4 values > 0), img_size or img_h + img_w (default: bottom 1's), step or step_h + step_w
// (default: image / map), offset (default 0.5) }.
class PriorBoxLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "PriorBox"; }
  // Device-neutral: the boxes depend only on shapes; they are made on the host and uploaded when
  // a GPU layer reads them, as SSD does (its PriorBox has no GPU code either).
  bool HasGpuKernels() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  int num_priors() const { return num_priors_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& map, const Blob& image, Blob* top) const;

  std::vector<float> min_sizes_;
  std::vector<float> max_sizes_;
  std::vector<float> aspect_ratios_;
  std::vector<float> variances_;
  bool clip_ = false;
  int img_h_ = 0;
  int img_w_ = 0;
  float step_h_ = 0;
  float step_w_ = 0;
  float offset_ = 0.5f;
  int num_priors_ = 0;
};

}  // namespace crema
