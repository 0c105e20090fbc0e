#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

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

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  bool use_global_stats_ = false;
  double moving_average_fraction_ = 0.999;
  double eps_ = 1e-5;
  int channels_ = 0;
  int num_ = 0;
  int64_t spatial_dim_ = 0;
  // Per channel, from the last Forward: sqrt(var + eps).
  std::vector<double> std_;
  // y, kept for Backward with batch statistics (a later in-place layer may overwrite the top);
  // empty with global statistics, whose Backward does not read it.
  Blob x_norm_;
  // GPU: per channel, in double: mean, 1 / sqrt(var + eps), mean(dy), mean(dy * y).
  Blob stats_gpu_{DataType::kFloat64};

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
