#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Unrolls every convolution window into a column, as the first half of a convolution: for each
// item of the batch (the axes before convolution_param.axis) the (C, spatial...) image becomes
// (C * prod(kernel), out spatial...) with out = (in + 2 pad - (dilation (kernel - 1) + 1)) /
// stride + 1 per spatial axis (padding reads as zero). Backward (col2im) sums each column
// element's diff back into the image element it came from.
// Params: convolution_param { kernel_size | kernel_h/_w (required), stride | stride_h/_w
// (default 1), pad | pad_h/_w (default 0), dilation (default 1) (each once for all spatial
// axes or once per axis; _h/_w for 2-D only), axis (channel axis, default 1),
// force_nd_im2col }. num_output, bias and fillers are ignored. Not in-place.
class Im2colLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Im2col"; }
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
  void Forward(const Blob& bottom, Blob* top) const;
  template <typename T>
  void Backward(const Blob& top, Blob* bottom) const;
  // Reads a repeated spatial field (once or once per axis) or its _h/_w alternatives.
  void ReadSpatial(const char* name, const char* hw, int num_values, const uint32_t* values,
                   bool has_h, bool has_w, uint32_t value_h, uint32_t value_w, int default_value,
                   std::vector<int>* out) const;

  int channel_axis_ = 1;
  int num_spatial_axes_ = 0;
  bool force_nd_im2col_ = false;
  std::vector<int> kernel_shape_, stride_, pad_, dilation_;
  int64_t num_ = 0;         // images: product of the axes before the channel axis
  int64_t bottom_dim_ = 0;  // elements per image
  int64_t top_dim_ = 0;     // elements per column block

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
