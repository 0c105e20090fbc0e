#pragma once
// Convolution, as Caffe: top[i] = W * bottom[i] + b for every bottom/top pair (weights shared).
// Bottom (batch..., C, spatial...) with C on convolution_param.axis; top (batch..., num_output,
// out...) with out = (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1 per spatial
// axis. Channels split into `group` independent groups. Weights (num_output, C / group, kernel...),
// bias (num_output). Params: convolution_param { num_output, bias_term, kernel_size | kernel_h/_w,
// pad | pad_h/_w, stride | stride_h/_w, dilation, group, axis, force_nd_im2col, weight_filler,
// bias_filler, engine }. Not in-place.
// CPU engines (src/math/dnnl_engine.hpp): float32 passes may run oneDNN (dnnl_convolution.hpp)
// instead of crema's kernels, per --cpu_engine (the `engine` field is Caffe's cuDNN choice).
#include <memory>

#include "core/host_memory.hpp"
#include "layers/convolution/base_conv_layer.hpp"
#include "layers/convolution/dnnl_convolution.hpp"
#include "math/blocked_conv.hpp"
#include "math/dnnl_engine.hpp"
#include "math/pointwise_depthwise.hpp"

namespace crema {

class CudnnConvolution;

class ConvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Convolution"; }
  bool SupportsFusedReLU() const override { return true; }
  ChannelBlocking channel_blocking() const override { return ChannelBlocking::kEngine; }
  bool ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) override;
  bool BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) override;
  // Whether the next Forward on these blobs runs oneDNN (the policy, or a decided race).
  bool NextForwardRunsDnnl(const BlobVec& bottom, const BlobVec& top);
  // Eltwise SUM fusion (src/net/README.md): with a `target`, the next Forward, which must run
  // oneDNN, computes target = target + conv (then the ReLU with `relu_slope` when non-null) in
  // the convolution's post-ops, in target's layout, and leaves top unwritten; null: a plain
  // Forward. fused_sum_ran(): whether the last Forward did so.
  void set_fused_sum(Blob* target, const float* relu_slope = nullptr) {
    fused_sum_ = target;
    fused_sum_relu_ = relu_slope != nullptr;
    fused_sum_slope_ = relu_slope != nullptr ? *relu_slope : 0.f;
  }
  bool fused_sum_ran() const { return fused_sum_ran_; }
  // Depthwise fusion (src/net/README.md, math/pointwise_depthwise.hpp). Whether this layer, a
  // 1x1 convolution (stride 1, no padding, one group, 2-D), and `depthwise`, a 3x3 depthwise
  // convolution of its output (pad 1, stride 1 or 2, one group per channel), are a pair that
  // cpu::PointwiseDepthwiseForward computes on this CPU for `bottom`'s shape (filling *shape).
  bool PointwiseDepthwiseWith(const ConvolutionLayer& depthwise, const Blob& bottom,
                              cpu::PointwiseDepthwiseShape* shape) const;
  // Whether the next Forward on these blobs runs oneDNN's direct kernel or crema's blocked one by
  // a decision already made (the policy, or a race run out), so that fusing it changes no race's
  // timing (the fused kernel's 1x1 part is crema's blocked one).
  bool ForwardDecidedDnnl(const BlobVec& bottom, const BlobVec& top);
  // With `depthwise` (see above) and its top `target`, the next Forward, on a bottom blocked by
  // 16 channels, computes target = depthwise(this layer's output) (then the ReLU with
  // `relu_slope` when non-null) blocked, and leaves top unwritten; null: a plain Forward.
  // fused_depthwise_ran(): whether the last Forward did so.
  void set_fused_depthwise(ConvolutionLayer* depthwise, Blob* target = nullptr,
                           const float* relu_slope = nullptr);
  bool fused_depthwise_ran() const { return fused_depthwise_.ran; }
  // Whether the last Forward ran crema's blocked kernel (CpuKernel::kCremaBlocked: a race's pass
  // or its decision).
  bool blocked_ran() const { return blocked_ran_; }
  // The CPU kernel of the last CPU pass (CpuKernelName), or "" before the first.
  const char* cpu_engine() const { return cpu_engine_choice_.last(); }
  CpuEngineChoice* cpu_engine_choice() override { return &cpu_engine_choice_; }

 protected:
  bool reverse_dimensions() const override { return false; }
  void ComputeOutputShape() override;
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                 const BlobVec& bottom);

  // ---- depthwise fast path (depthwise_conv.hpp): group == channels, 2-D ----
  // Fills *shape and returns true when this layer runs the direct depthwise loops.
  bool DepthwiseShapeOf(struct DepthwiseShape* shape) const;
  // ---- end depthwise fast path ----

  // ---- oneDNN CPU engine (dnnl_convolution.hpp) ----
  // The CPU engine policy for this layer (kCaffe for other types than float32 and geometries
  // oneDNN does not take); prepares the oneDNN primitives for bottom i.
  CpuEngine DnnlPolicy(const Blob& bottom, const Blob& top);
  // `kernel`: kDnnl, kDnnlWinograd (oneDNN's Winograd convolution, DnnlConvolution::HasWinograd)
  // or kCremaBlocked (crema's blocked kernel where BlockedConvApplies, else oneDNN's direct
  // one). A fused sum or depthwise layer runs its fusion.
  void ForwardDnnl(const BlobVec& bottom, const BlobVec& top, CpuKernel kernel);
  void BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom, bool winograd);
  std::shared_ptr<DnnlConvolution> dnnl_;
  DnnlConvGeometry dnnl_geometry_;  // DnnlPolicy's, kept for its vectors' memory
  CpuEngineChoice cpu_engine_choice_;
  Blob* fused_sum_ = nullptr;
  bool fused_sum_relu_ = false, fused_sum_ran_ = false;
  float fused_sum_slope_ = 0;
  // Weights in a kernel's order (math/pointwise_depthwise.hpp, math/blocked_conv.hpp), at a
  // 64-byte boundary (a vector load across two cache lines costs two: the fused kernel ran 25%
  // slower with weights 16-byte aligned).
  class PackedWeights {
   public:
    // Room for `count` floats (AllocateHost: huge pages from kWeightHugePagesFrom, since the
    // kernels read them in every pass).
    float* Resize(size_t count);
    // Gives the memory back.
    void Clear() {
      floats_.reset();
      capacity_ = 0;
    }
    const float* data() const { return floats_.get(); }

   private:
    HostFloats floats_;
    size_t capacity_ = 0;
  };
  // The depthwise layer fused into the next Forward, and the weights of both in the kernel's
  // order, packed from the weight buffers of these generations (Blob::data_generation).
  struct FusedDepthwise {
    ConvolutionLayer* layer = nullptr;
    Blob* target = nullptr;
    bool relu = false, ran = false;
    float slope = 0;
    uint64_t pointwise_generation = 0, depthwise_generation = 0;
    PackedWeights packed;  // the 1x1 weights, then (at a 16-float boundary) the depthwise ones
  };
  FusedDepthwise fused_depthwise_;
  // Computes the fused pair when it applies to this bottom (false: it did nothing).
  bool ForwardFusedDepthwise(const Blob& bottom);
  // crema's blocked kernels (cpu::BlockedConv3x3Forward, cpu::PointwiseForward,
  // cpu::DepthwiseForward): whether this layer is one they compute (3x3 with pad 1 or 1x1
  // without, stride 1, one group; or 3x3 depthwise with pad 1, stride 1 or 2; 2-D, float32, an
  // inference net's layer, a top that may be blocked by 16) for these blobs (filling *shape),
  // and the pass itself on a bottom blocked by 16 (or plain, for the 3x3 kernel; its output
  // blocked; false: it did nothing), with the weights packed from the buffer of that generation
  // (no packed copy kept once a race has decided for another kernel).
  bool BlockedConvApplies(const Blob& bottom, const Blob& top, cpu::BlockedConvShape* shape) const;
  bool ForwardBlockedConv(const Blob& bottom, Blob* top);
  PackedWeights blocked_weights_;
  uint64_t blocked_generation_ = 0;
  bool blocked_ran_ = false;
  // ---- end oneDNN CPU engine ----

#ifdef CREMA_WITH_CUDA
  // The cuDNN engine (cudnn_convolution.hpp), created on the first GPU pass.
  std::shared_ptr<CudnnConvolution> cudnn_;
  bool CudnnFits() const;

 public:
  // cuDNN or crema's depthwise kernels, chosen in the first passes; geometries cuDNN does not take
  // run on the CPU.
  bool SupportsGraphCapture() const override { return CudnnFits(); }
#endif

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
