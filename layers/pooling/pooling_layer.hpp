#pragma once
// Pooling over the two spatial axes of an (N, C, H, W) bottom, as Caffe. Output size per axis:
// ceil((H + 2 * pad - kernel) / stride) + 1 (floor with round_mode: FLOOR); with pad > 0 a last
// window that would start inside the padding ((out - 1) * stride >= H + pad) is dropped.
//   MAX: the window maximum (the first one wins ties); an optional second top receives the
//        argmax as a flat index h * W + w into the bottom plane.
//   AVE: the sum over the window clipped to the image, divided by the window size clipped to
//        H + pad / W + pad (so padding cells count, cells beyond the padding do not).
//   STOCHASTIC (no padding): TRAIN samples one cell with probability proportional to its value
//        (values must be >= 0); TEST gives sum(x^2) / sum(x). Caffe has this on GPU only; the
//        CPU code here follows its kernels. TEST backward is the gradient of the TEST formula.
// Params: pooling_param { pool, kernel_size | kernel_h/_w, pad | pad_h/_w, stride | stride_h/_w,
// global_pooling, round_mode, engine }; pad must be < kernel. Not in-place.
// CPU engines (src/math/dnnl_engine.hpp): float32 MAX and AVE passes may run oneDNN
// (dnnl_pooling.hpp, where its function equals Caffe's; not with a mask top) instead of crema's
// kernels, per --cpu_engine (the `engine` field is Caffe's cuDNN choice); global AVE pooling in
// inference also races crema's kernel on the channel-blocked layout.
#include <memory>

#include "crema/layer.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {

class DnnlPooling;

class PoolingLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "Pooling"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX can write the argmax mask into a second top.
  int MaxTopBlobs() const override {
    return layer_param_.pooling_param().pool() == PoolingParameter::MAX ? 2 : 1;
  }

  int pooled_height() const { return pooled_height_; }
  int pooled_width() const { return pooled_width_; }
  // The CPU engine of the last CPU pass: "crema", "oneDNN", or "" before the first.
  const char* cpu_engine() const { return cpu_engine_choice_.last(); }
  CpuEngineChoice* cpu_engine_choice() override { return &cpu_engine_choice_; }
  bool CpuEngineRacesBackward() const override { return pool_ != PoolingParameter::MAX; }
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kEngine; }
  bool ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) override;
  bool BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) override;
  bool ChannelBlockedOnlyFromBlocked() const override { return true; }
  // MAX and AVE under crema's kernels (not oneDNN's).
  bool SupportsFusedReLUBackward() const override {
    return pool_ == PoolingParameter::MAX || pool_ == PoolingParameter::AVE;
  }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  // Global AVE pooling (one unpadded window over each whole plane) in float32 in inference:
  // crema's blocked kernel (CpuKernel::kCremaBlocked in the race) reads a channel-blocked bottom
  // as it is (ForwardGlobalAverageBlocked), each channel's sum in the plane's order as ForwardT's
  // (the same bits), into a plain top.
  bool GlobalAverageReadsBlocked(const Blob& bottom) const;
  void ForwardGlobalAverageBlocked(const Blob& bottom, Blob* top);
  // relu_slope: the negative slope of the ReLU fused into this Backward (MAX, AVE), or null.
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom,
                 const float* relu_slope);

  // ---- oneDNN CPU engine (dnnl_pooling.hpp) ----
  // The CPU engine policy for this pass (kCaffe where oneDNN does not apply); prepares oneDNN.
  CpuEngine DnnlPolicy(const BlobVec& bottom, const BlobVec& top);
  std::shared_ptr<DnnlPooling> dnnl_;
  CpuEngineChoice cpu_engine_choice_;
  // MAX: Backward must use the engine whose Forward left the argmax.
  bool forward_ran_dnnl_ = false;
  // ---- end oneDNN CPU engine ----

  PoolingParameter::PoolMethod pool_ = PoolingParameter::MAX;
  bool global_pooling_ = false;
  PoolingParameter::RoundMode round_mode_ = PoolingParameter::CEIL;
  int kernel_h_ = 0, kernel_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int channels_ = 0, height_ = 0, width_ = 0;
  int pooled_height_ = 0, pooled_width_ = 0;
  // MAX without a mask top: the argmax per output; STOCHASTIC (TRAIN): the sampled cell. Both as
  // flat indices into the bottom plane. MAX keeps none when forward_only().
  std::vector<int> max_idx_;
  // GPU MAX without a mask top: the argmax per output as exact small integers in float.
  Blob max_idx_gpu_;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
