#pragma once
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Multiplies bottom[0] by a scale broadcast over it, optionally adding a bias, as Caffe:
//   top[o, d, i] = bottom[o, d, i] * s[d] (+ b[d'])   (o outer, d over s's axes, i inner).
// s lines up with axes [axis, axis + s.num_axes()) of bottom[0] (a scalar s has axis 0). s is
// bottom[1] when given, else a learned blob of shape bottom[0].shape[axis, axis + num_axes)
// (num_axes -1: to the end). With bias_term, b is always learned and, as in Caffe, its shape is
// bottom[0].shape[axis, axis + num_axes) even when s comes from bottom[1].
// Backward: d bottom[0] = d top * s; d s = sum over o and i of d top * bottom[0];
// d b = sum over o and i of d top. Learned blobs accumulate their diffs; bottom[1]'s is written.
// Blobs: [s, b] with one bottom, [b] with two (when bias_term). In-place safe (top == bottom[0]):
// the bottom is then kept for the gradient of s.
// Params: scale_param { axis (1), num_axes (1; -1 = all remaining; ignored for s from bottom[1]),
// filler (constant 1 by default), bias_term (false), bias_filler (constant 0 by default) }.
class ScaleLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Scale"; }
  bool SupportsFusedReLU() const override { return true; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  // Set by the net when the BatchNorm right before this in-place Scale keeps this layer's input
  // itself (its normalised output, BatchNormLayer::x_norm()): Forward then copies nothing and
  // Backward reads `bottom_value` as the bottom's value. Null (the default): the layer keeps its
  // own copy in place.
  void set_bottom_kept_by(const Blob* bottom_value) { kept_bottom_ = bottom_value; }
  // Whether this is one scale (and a bias lined up with it) per channel of axis 1, with one
  // bottom: what a BatchNorm can compute fused with it.
  bool IsPerChannel() const;
  // The learned bias (null without bias_term) and whether Backward computes its diff.
  Blob* bias_blob() const { return bias_term_ ? blobs_[bias_param_id_].get() : nullptr; }
  bool bias_diff_wanted() const { return bias_term_ && param_propagate_down(bias_param_id_); }
  // Channel-blocked values (src/net/net_layout.cpp): in a BatchNorm group the BatchNorm computes
  // this layer on them (BatchNormLayer::ReadsChannelBlocked); run alone it reads them plain.
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kEngine; }
  bool ChannelBlockedOnlyFromBlocked() const override { return true; }

  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // The axis of bottom[0] where `blob` lines up (0 for a scalar), checked against its shape.
  int BroadcastAxis(const Blob& bottom, const Blob& blob, const char* what);
  // A learned blob of bottom[0].shape[axis, axis + num_axes) filled by `filler`.
  void AddLearnedBlob(const Blob& bottom, const FillerParameter& filler, const char* filler_field);
  // The value of bottom[0] as Forward saw it, for the gradient of the scale.
  const Blob* BottomValue(const BlobVec& bottom, const BlobVec& top) const;
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                 const BlobVec& bottom);

  bool bias_term_ = false;
  int bias_param_id_ = -1;
  int64_t outer_dim_ = 0, scale_dim_ = 0, inner_dim_ = 0;
  int64_t bias_outer_dim_ = 0, bias_dim_ = 0, bias_inner_dim_ = 0;
  // In place: a copy of bottom[0] for the gradient of the scale (none when forward_only() or
  // kept_bottom_ is set).
  Blob bottom_copy_;
  const Blob* kept_bottom_ = nullptr;
  int axis_ = 1;
  bool learned_scale_ = true;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
