#pragma once
// The machinery shared by convolution-like layers (Convolution, Deconvolution), as Caffe's
// BaseConvolutionLayer: parameter parsing and checks, learnable blobs, and the im2col + GEMM
// kernels for one image.
//
// Axes: bottom is (batch axes..., C, spatial axes...) with the channel axis at
// convolution_param.axis; the number of spatial axes comes from the bottom. Per spatial axis:
// kernel (> 0), pad (default 0), stride (> 0, default 1), dilation (> 0, default 1), each given
// once for all axes or once per axis; kernel_h/_w, pad_h/_w, stride_h/_w are 2-D alternatives.
// Weights: (conv_out_channels, conv_in_channels / group, kernel...); bias: (num_output).
// For a forward convolution conv_out = num_output and conv_in = C; a "reversed" layer
// (Deconvolution) swaps them. Kernels 1x..x1 with stride 1 and pad 0 skip im2col and read the
// input directly. Param diffs accumulate (+=) as in Caffe; the solver clears them.
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class BaseConvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }

  // The spatial output size per axis (set by Reshape).
  const std::vector<int>& output_shape() const { return output_shape_; }
  // Every output value of every image is a dot product of kernel_dim_ terms.
  double ForwardFlops() const override {
    return 2.0 * static_cast<double>(num_) * conv_out_channels_ * kernel_dim_ *
           static_cast<double>(conv_out_spatial_dim_);
  }

 protected:
  // True when the layer maps top to bottom (Deconvolution): im2col runs on the top.
  virtual bool reverse_dimensions() const = 0;
  // Fills output_shape_ from input_shape() and the kernel geometry.
  virtual void ComputeOutputShape() = 0;

  // Spatial size of bottom[0] along spatial axis i (0-based).
  int input_shape(int i) const { return bottom_shape_[channel_axis_ + 1 + i]; }

  // One image: output = weights * im2col(input). The columns live in the net's workspace:
  // skip_im2col reuses those of the previous call of this layer within one Forward/Backward.
  template <typename T>
  void ForwardGemm(const T* input, const T* weights, T* output, bool skip_im2col = false);
  // One image: output += bias broadcast over the spatial positions.
  template <typename T>
  void ForwardBias(T* output, const T* bias);
  // One image: input = col2im(weights^T * output).
  template <typename T>
  void BackwardGemm(const T* output, const T* weights, T* input);
  // One image: weights += output * im2col(input)^T.
  template <typename T>
  void WeightGemm(const T* input, const T* output, T* weights);
  // One image: bias += sum over spatial positions of output.
  template <typename T>
  void BackwardBias(T* bias, const T* input);

  // The whole batch (forward convolution only, not reverse_dimensions()): the images are
  // im2col'ed side by side into one column buffer (kernel_dim * group) x (images * spatial), in
  // chunks of images that keep it under kBatchColumnBytes, so each group takes one large GEMM
  // instead of one small GEMM per image; the (out channels) x (images * spatial) result is then
  // scattered into top's (images, out channels, spatial) layout with the bias added. Column and
  // result buffers are borrowed from the net's workspace, so a net holds one, the largest, instead
  // of one per layer.
  // Per-image work runs in parallel over (image, channel) pairs, each writing its own memory, so
  // results do not depend on the thread count.
  template <typename T>
  void ForwardBatch(const T* bottom, const T* weights, const T* bias, T* top);
  // Backward of ForwardBatch; null outputs are skipped. weight_diff and bias_diff accumulate (+=);
  // bottom_diff is overwritten.
  template <typename T>
  void BackwardBatch(const T* top_diff, const T* bottom, const T* weights, T* weight_diff,
                     T* bias_diff, T* bottom_diff);
  // 1x1 kernels with stride 1 and pad 0 (is_1x1_): the input already is the column buffer, so
  // ForwardBatch/BackwardBatch run these instead: per image and group one GEMM straight on
  // bottom and top (no im2col, no gather or scatter copies). Backward1x1 does not touch the bias.
  template <typename T>
  void Forward1x1(const T* bottom, const T* weights, const T* bias, T* top);
  template <typename T>
  void Backward1x1(const T* top_diff, const T* bottom, const T* weights, T* weight_diff,
                   T* bottom_diff);
  // A window that is the whole input (one output position, no padding or dilation, one group:
  // covers_input_, e.g. MobileNet's classifier, a 1x1 convolution of a 1x1 input): the layer is
  // an inner product, top (images x out channels) = bottom (images x kernel_dim_) * weights^T, so
  // float runs the inner product's kernels over the whole batch in one pass over the weights
  // (cpu::GemmFewRows, cpu::GemmFewRowsBackward) instead of one matrix-vector product per image.
  // False where that does not apply (another type; returns without touching the outputs).
  template <typename T>
  bool ForwardCoversInput(const T* bottom, const T* weights, const T* bias, T* top);
  template <typename T>
  bool BackwardCoversInput(const T* top_diff, const T* bottom, const T* weights, T* weight_diff,
                           T* bottom_diff);
  // Small enough for the column chunk to stay in a core's L2 cache between im2col and the GEMM
  // that reads it (32 MiB made cifar10_quick training ~25% slower); an image whose columns are
  // larger is a chunk of its own.
  static constexpr int64_t kBatchColumnBytes = int64_t{1} << 20;

  // Parameters (fixed by LayerSetUp).
  int channel_axis_ = 1;
  int num_spatial_axes_ = 0;
  std::vector<int> kernel_shape_;
  std::vector<int> stride_;
  std::vector<int> pad_;
  std::vector<int> dilation_;
  bool force_nd_im2col_ = false;
  bool is_1x1_ = false;
  bool covers_input_ = false;  // set by Reshape (above)
  bool bias_term_ = true;
  int channels_ = 0;
  int num_output_ = 0;
  int group_ = 1;
  int conv_out_channels_ = 0;
  int conv_in_channels_ = 0;
  int64_t kernel_dim_ = 0;
  int64_t weight_offset_ = 0;

  // Shapes (set by Reshape).
  std::vector<int> bottom_shape_;
  std::vector<int> top_shape_;  // Reshape's
  std::vector<int> output_shape_;
  std::vector<int> conv_input_shape_;  // (channels, spatial...) of the im2col side
  std::vector<int> col_buffer_shape_;
  int64_t num_ = 0;
  int64_t bottom_dim_ = 0;
  int64_t top_dim_ = 0;
  int64_t conv_out_spatial_dim_ = 0;
  int64_t out_spatial_dim_ = 0;
  int64_t col_offset_ = 0;
  int64_t output_offset_ = 0;

 private:
  // Reads a repeated spatial field (once or once per axis) or its _h/_w alternatives.
  void ReadSpatialParam(const char* name, int num_values, const uint32_t* values, bool has_h,
                        bool has_w, uint32_t value_h, uint32_t value_w, int default_value,
                        bool required, std::vector<int>* out);
  template <typename T>
  void Im2colCpu(const T* data, T* col);
  template <typename T>
  void Col2imCpu(const T* col, T* data);

  // Images per chunk in ForwardBatch/BackwardBatch for an element of `bytes` bytes.
  int64_t BatchChunk(int64_t bytes) const;
  // The batched column buffer and top (or its diff) as (out channels) x (images * spatial) for
  // `chunk` images, in the net's workspace (valid during this Forward or Backward only).
  template <typename T>
  T* ColBuffer();  // one image's columns, in the workspace
  template <typename T>
  void BatchScratch(int64_t chunk, T** col, T** out);
  // Images [0, images) starting at `data` into (or, for col2im, from) a column buffer whose rows
  // hold images * conv_out_spatial_dim_ elements.
  template <typename T>
  void Im2colBatch(const T* data, int64_t images, T* col);
  template <typename T>
  void Col2imBatch(const T* col, int64_t images, T* data);

  Blob bias_multiplier_;
};

}  // namespace crema
