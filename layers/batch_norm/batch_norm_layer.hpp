#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class ScaleLayer;

// Batch normalisation without the affine part (follow it with Scale, bias_term: true), as Caffe.
// Bottom (N, C, ...) (a 1-D bottom is one channel); top the same shape. Per channel c, over the
// M = N * spatial values of that channel:
//   y = (x - mean_c) / sqrt(var_c + eps)
// Batch statistics (use_global_stats false, the default in TRAIN): mean and biased variance of
// the batch; Forward also updates the three statistics blobs, with f = moving_average_fraction:
//   blobs[2] = f * blobs[2] + 1;  blobs[0] = f * blobs[0] + mean;
//   blobs[1] = f * blobs[1] + M / (M - 1) * var   (M / (M - 1) is 1 when M == 1).
// Global statistics (use_global_stats true, the default in TEST): mean = blobs[0] / blobs[2],
// var = blobs[1] / blobs[2] (both 0 when blobs[2] == 0).
// Backward: batch statistics dx = (dy - mean(dy) - y * mean(dy * y)) / sqrt(var + eps) (means
// per channel); global statistics dx = dy / sqrt(var + eps).
// Blobs: mean (C), variance (C), moving-average scale factor (1); statistics, not learned: they
// get no diff, param_propagate_down is false, and like Caffe the layer appends param specs with
// lr_mult 0 (a given spec with a non-zero lr_mult is an error). In-place safe.
// Params: batch_norm_param { use_global_stats, moving_average_fraction (0.999), eps (1e-5) }.
// Fused with the Scale (and ReLU) after it (the net's BatchNorm groups, src/net/README.md): the
// normalised value y is kept in x_norm(), which that in-place Scale reads as its input instead of
// copying it; one pass computes ReLU(y * scale + bias) and BackwardFused the gradients of all
// three layers in two passes, with the same operations (and on the CPU the same sums) as the
// layers one by one.
// GPU statistics are per-channel sums in double (math/channel_gpu.cuh: one pass, fixed order).
class BatchNormLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "BatchNorm"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
  bool use_global_stats() const { return use_global_stats_; }

  // The normalised output y of the last Forward (kept when Backward needs it or keep_x_norm).
  const Blob& x_norm() const { return x_norm_; }
  // Keeps y also with global statistics (a Scale reads it as its input; the net sets this).
  void set_keep_x_norm(bool keep) { keep_x_norm_ = keep; }
  // Whether Forward keeps y in x_norm(): when Backward needs it or keep_x_norm, not forward-only.
  bool keeps_x_norm() const { return !forward_only() && (!use_global_stats_ || keep_x_norm_); }
  // The Scale (and ReLU, when relu) that the next Forward computes with this layer, in place
  // on this layer's top; null: this layer alone. Set by the net before each Forward.
  void set_fused_scale(ScaleLayer* scale, bool relu, float negative_slope);
  // After a Forward fused with `scale` (and its ReLU): the gradients of the three layers
  // from the top's diff, as their Backwards in turn: the ReLU's (when fused in that Forward), the
  // Scale's parameter diffs it asks for, and bottom diff when propagate_down.
  void BackwardFused(const BlobVec& top, bool propagate_down, const BlobVec& bottom);
  // Whether the last Forward ran fused with a Scale (and with its ReLU); the net forgets it when
  // the Scale runs again on its own.
  bool ran_fused() const { return ran_fused_ != nullptr; }
  void ForgetFusedForward() { ran_fused_ = nullptr; }
  bool ran_fused_relu() const { return ran_fused_ != nullptr && ran_fused_relu_; }
  // Channel-blocked values (src/net/net_layout.cpp): fused with its Scale (a BatchNorm group),
  // the layer reads a blocked bottom and writes its top, and keeps y, in that layout; its
  // gradients follow, as the top's gradient arrives (the per-channel sums in the same order
  // either way: the same bits). Alone, plain. Chains start at a convolution, never here.
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kEngine; }
  bool ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) override;
  bool ChannelBlockedOnlyFromBlocked() const override { return true; }
  bool BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) override;
  // Puts the kept y back into the plain layout where the last Forward left it blocked: before
  // the Scale reads it in a Backward of its own (the net's; the group's fused Backward and this
  // layer's own take care of it).
  void PlainXNorm();

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // B: the blobs' channel block (1: plain; math/channel_loops.hpp).
  template <typename T, int B>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T, int B>
  void BackwardT(const Blob& top, Blob* bottom);
  template <typename T, int B>
  void BackwardFusedT(Blob* top, bool propagate_down, Blob* bottom);
  template <typename T, bool kRelu, int B>
  void BackwardFusedT(Blob* top, bool propagate_down, Blob* bottom);
  // The channel block of the top's gradient a backward pass reads (0: plain), y put into that
  // layout first (blocked to plain where the gradient arrives plain).
  int BackwardBlock(const Blob& top);
  void BackwardFusedGpu(const BlobVec& top, bool propagate_down, const BlobVec& bottom);

  bool use_global_stats_ = false;
  double moving_average_fraction_ = 0.999;
  double eps_ = 1e-5;
  int channels_ = 0;
  int num_ = 0;
  int64_t spatial_dim_ = 0;
  // Per channel, from the last Forward: sqrt(var + eps).
  std::vector<double> std_;
  // y, kept for Backward with batch statistics (a later in-place layer may overwrite the top)
  // and for a Scale that reads it (keep_x_norm_); else empty.
  Blob x_norm_;
  bool keep_x_norm_ = false;
  ScaleLayer* fused_scale_ = nullptr;
  bool scale_relu_ = false;
  float scale_relu_slope_ = 0;
  // The Scale and ReLU the last Forward ran fused with (null: none).
  ScaleLayer* ran_fused_ = nullptr;
  bool ran_fused_relu_ = false;
  float ran_fused_slope_ = 0;
  // The channel block of the last Forward's bottom, top and y (0: plain).
  int forward_block_ = 0;
  // GPU: per channel, in double: mean, 1 / sqrt(var + eps), mean(dy), mean(dy * y).
  Blob stats_gpu_{DataType::kFloat64};

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
