#pragma once
// Caffe's layer contract: SetUp (LayerSetUp + Reshape) once, then Forward/Backward over bottom
// (input) and top (output) blobs. Loss layers find their loss weight in the top diff. A layer
// that has no GPU kernel runs its CPU code inside a GPU net; the net says so once.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/device.hpp"
#include "crema/error.hpp"
#include "crema/proto.hpp"

namespace crema {

class CpuEngineChoice;
class Workspace;

class Layer {
 public:
  explicit Layer(const LayerParameter& param);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks blob counts, runs LayerSetUp and Reshape, and writes loss weights into top diffs.
  void SetUp(const BlobVec& bottom, const BlobVec& top);
  // Reads parameters and creates learnable blobs; called once.
  virtual void LayerSetUp(const BlobVec& bottom, const BlobVec& top) {}
  // Shapes the tops (and internal buffers) from the bottoms; called whenever inputs change.
  virtual void Reshape(const BlobVec& bottom, const BlobVec& top) = 0;

  // Runs the layer on its device; returns the weighted loss of its loss tops. While a CUDA graph
  // is captured (gpu::Capturing) it returns 0 and leaves out CheckForward: the net reads the
  // loss (WeightedLoss) and runs the checks after the replay.
  double Forward(const BlobVec& bottom, const BlobVec& top);
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  // The prototxt type string, e.g. "Convolution".
  virtual const char* type() const = 0;
  const std::string& name() const { return layer_param_.name(); }
  const LayerParameter& layer_param() const { return layer_param_; }
  Phase phase() const { return phase_; }
  // Writes the parameter and the learnable blobs (and their diffs when asked).
  virtual void ToProto(LayerParameter* param, bool write_diff = false) const;

  std::vector<BlobPtr>& blobs() { return blobs_; }
  const std::vector<BlobPtr>& blobs() const { return blobs_; }

  double loss(int top_index) const {
    return top_index < static_cast<int>(loss_.size()) ? loss_[top_index] : 0.0;
  }
  void set_loss(int top_index, double value);

  // Declared blob counts; -1 means "no constraint".
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, the net creates anonymous tops up to the required count.
  virtual bool AutoTopBlobs() const { return false; }
  // Whether force_backward may make this bottom receive a gradient (false for labels).
  virtual bool AllowForceBackward(int bottom_index) const { return true; }
  // False for layers whose tops pass no gradient back (Accuracy, ArgMax, Threshold): a non-zero
  // loss_weight on their tops is then a ConfigError at set-up.
  virtual bool HasGradient() const { return true; }
  // Whether a top may be the same blob as its bottom.
  virtual bool AllowsInPlace() const { return false; }
  // With more than one bottom: whether Forward may write its only top over its first bottom's
  // memory (elementwise; the inference memory plan then runs it so where legal).
  virtual bool AllowsInPlaceOnFirstBottom() const { return false; }
  // Whether ForwardGpu/BackwardGpu are real kernels (otherwise they run the CPU code).
  virtual bool HasGpuKernels() const { return false; }
  // Whether ForwardGpu/BackwardGpu may be captured into a CUDA graph and replayed
  // (net/iteration_graph.hpp): no host synchronisation or host reads of device values (those go
  // to CheckForward), no allocation once the shapes are set, and kernel arguments that do not
  // change between iterations of the same shapes (no per-iteration seeds or counters).
  virtual bool SupportsGraphCapture() const { return false; }
  // The weighted loss of the loss tops as the last Forward left them (reads the device).
  double WeightedLoss(const BlobVec& top) const;
  // Host checks of what the last Forward computed on the device (a label out of range, say),
  // run after it: by Forward, or by the net after a graph replay. RuntimeError or ConfigError.
  virtual void CheckForward(const BlobVec& bottom, const BlobVec& top) {}
  // Layers that choose a CPU engine per input shape and direction (Convolution, Pooling and
  // InnerProduct, math/dnnl_engine.hpp): that choice, keyed by "forward"/"backward" and
  // bottom[0]'s shape; null for the others. The net decides it before training
  // (Net::PrepareCpuEngines) and a .solverstate keeps it.
  virtual CpuEngineChoice* cpu_engine_choice() { return nullptr; }
  // Whether that choice races Backward's engines too; false where Backward runs the engine its
  // Forward ran (MAX pooling: the engine that recorded the argmax), so that the net's races
  // (Net::PrepareCpuEngines) run Forward only once its choice is made.
  virtual bool CpuEngineRacesBackward() const { return true; }
  // Floating-point operations of one Forward with the current shapes (a multiply-add counts 2),
  // for the layers that do the arithmetic of a net (Convolution, Deconvolution, InnerProduct:
  // crema time's GFLOP/s); 0 for the others. Their Backward does twice as many (the input and
  // the weight gradients).
  virtual double ForwardFlops() const { return 0; }

  // Data layers that know their source's size: the records in one pass over it (-1: unknown or
  // not a data layer) and the records per Forward.
  virtual int64_t NumRecords() const { return -1; }
  virtual int64_t BatchSize() const { return 0; }
  // Data layers: writes where the layer is in its source, as of the last batch Forward handed
  // out (prefetched batches not counted), and returns true; false for layers without a position.
  virtual bool SaveDataState(DataLayerState* state) const { return false; }
  // Continues reading from a state SaveDataState wrote (RuntimeError when the source no longer
  // fits it).
  virtual void RestoreDataState(const DataLayerState& state) {}

  bool param_propagate_down(int param_id) const {
    return param_id < static_cast<int>(param_propagate_down_.size()) &&
           param_propagate_down_[param_id];
  }
  void set_param_propagate_down(int param_id, bool value);

  // Scratch memory shared with the other layers of a net (src/core/workspace.hpp); a layer
  // without one makes its own.
  void set_workspace(std::shared_ptr<Workspace> workspace) { workspace_ = std::move(workspace); }
  // Set by a net planned for inference (MemoryPlan::kInference): Backward will not run, so the
  // layer may skip keeping what only Backward reads; Backward then throws RuntimeError.
  void set_forward_only(bool value) { forward_only_ = value; }
  bool forward_only() const { return forward_only_; }

  // ReLU fusion (NetOptions::fuse_relu): a layer that returns true applies an in-place ReLU's
  // function to its only top at the end of its Forward (CPU and GPU) when the net asks
  // (set_fused_relu), and the net then skips that ReLU's Forward (its Backward: see below).
  virtual bool SupportsFusedReLU() const { return false; }
  void set_fused_relu(bool on, float negative_slope = 0) {
    fused_relu_ = on;
    fused_relu_slope_ = negative_slope;
  }
  bool fused_relu() const { return fused_relu_; }
  float fused_relu_slope() const { return fused_relu_slope_; }

  // The ReLU's Backward fused the other way (NetOptions::fuse_relu, CPU nets): where bottom k is
  // the output of an in-place ReLU that no other layer reads, a layer that returns true here
  // computes that ReLU's gradient (math/activation.hpp: ReLUGradient, the ReLU layer's expression)
  // on bottom k's gradient as it writes it, while that part is still in the cache, reading bottom
  // k's data (the ReLU's output). The net sets `slopes` (one per bottom, NaN: no ReLU) before the
  // Backward and clears them after; the layer takes a ReLU only where it applies it
  // (TakeFusedReLUBackward), and the net skips the Backward of the ReLUs taken.
  virtual bool SupportsFusedReLUBackward() const { return false; }
  void set_fused_relu_backward(std::vector<float> slopes) {
    fused_relu_backward_ = std::move(slopes);
    fused_relu_backward_taken_.assign(fused_relu_backward_.size(), 0);
  }
  bool fused_relu_backward_taken(int bottom) const {
    return bottom < static_cast<int>(fused_relu_backward_taken_.size()) &&
           fused_relu_backward_taken_[bottom];
  }

  // Plain SGD's step (src/math/sgd_step.hpp) on a param, fused into the Backward that writes its
  // gradient (CPU, float): a layer that returns true for param p applies the step where it has
  // just written a block of p's gradient, while that is in cache, instead of the solver's pass
  // over the weights, gradient and history afterwards; the same bits. The solver hands the steps
  // over for one Backward (Net::SetFusedSgdSteps: `history` null for none) and skips the params
  // whose step was taken (TakeFusedSgdStep).
  struct SgdStep {
    float rate = 0, momentum = 0, decay = 0;
    Blob* history = nullptr;
  };
  virtual bool SupportsFusedSgdStep(int param) const { return false; }
  void set_fused_sgd_steps(std::vector<SgdStep> steps) {
    fused_sgd_steps_ = std::move(steps);
    fused_sgd_step_taken_.assign(fused_sgd_steps_.size(), 0);
  }
  bool fused_sgd_step_taken(int param) const {
    return param < static_cast<int>(fused_sgd_step_taken_.size()) && fused_sgd_step_taken_[param];
  }

  // Channel-blocked CPU data and gradients between the layers of a net (Blob::cpu_channel_block,
  // Blob::cpu_diff_channel_block, src/net/net_layout.cpp): how this layer takes them.
  enum class ChannelBlocking {
    kNone,         // plain bottoms (and top gradients) only: the net puts blocked ones back to
                   // plain first
    kPassThrough,  // elementwise, or copies whole per-image channel slabs, forward and backward:
                   // gives the same on blocked blobs (all alike), and what it writes is then
                   // blocked alike
    kEngine,       // reads blocked bottoms when ReadsChannelBlocked() is true, and writes a top
                   // blocked where Blob::channel_block_allowed() (oneDNN's layers); backward
                   // likewise with BackwardReadsChannelBlocked(), its bottoms' gradients
  };
  virtual ChannelBlocking channel_blocking() const { return ChannelBlocking::kNone; }
  // kEngine: whether the next Forward on these blobs reads channel-blocked bottoms.
  virtual bool ReadsChannelBlocked(const BlobVec& bottom, const BlobVec& top) { return false; }
  // kEngine: whether it writes blocked tops only from blocked bottoms (Pooling: a chain of
  // blocked layouts starts at a convolution, whose kernels the engine race weighs).
  virtual bool ChannelBlockedOnlyFromBlocked() const { return false; }
  // kEngine: whether the next Backward on these blobs reads channel-blocked top gradients and
  // bottoms (each as its tag says), and writes the bottoms' gradients blocked where allowed,
  // tagging them.
  virtual bool BackwardReadsChannelBlocked(const BlobVec& top, const BlobVec& bottom) {
    return false;
  }

  void set_device(const Device& device) { device_ = device; }
  const Device& device() const { return device_; }
  // Element type used for tops and learnable blobs created by this layer.
  DataType dtype() const { return dtype_; }
  void set_dtype(DataType type) { dtype_ = type; }

  // Where this layer's text came from, for error messages: given a field path relative to the
  // layer (e.g. "convolution_param.kernel_size"), returns "file:line:col" or "".
  using Locator = std::function<std::string(const std::string& field)>;
  void set_locator(Locator locator) { locator_ = std::move(locator); }
  // "file:line:col: layer "conv1" (Convolution): " — the prefix of every parameter error.
  std::string ErrorPrefix(const std::string& field = "") const;

 protected:
  virtual void ForwardCpu(const BlobVec& bottom, const BlobVec& top) = 0;
  virtual void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) = 0;
  virtual void ForwardGpu(const BlobVec& bottom, const BlobVec& top) { ForwardCpu(bottom, top); }
  virtual void BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
    BackwardCpu(top, propagate_down, bottom);
  }

  // A learnable blob as the layer creates it, to check blobs that came with the parameter
  // (LayerParameter.blobs: a net saved with its weights) against, or to create it.
  struct ExpectedBlob {
    std::string name;        // "weight", "bias", "slopes", ... (for errors)
    std::vector<int> shape;  // the shape the layer gives it
    // Caffe checks only the number of values (PReLU, Normalize, Embed, Parameter); otherwise the
    // shape must be this one or Caffe's legacy 4-D form of it (leading 1s).
    bool any_shape_of_its_count = false;
    // For SetUpLearnableBlobs: its filler and that field's path ("convolution_param.
    // weight_filler", for errors); none: zeros.
    const FillerParameter* filler = nullptr;
    std::string filler_field = {};
  };
  // Loaded blobs: ConfigError (field "blobs") unless blobs_ holds one blob per entry of
  // `expected` that fits it (`why`, when given, explains the expected shape); then reshapes each
  // to its expected shape and converts it to the layer's dtype.
  void AdoptLoadedBlobs(const std::vector<ExpectedBlob>& expected, const std::string& why = "");
  // The learnable blobs of LayerSetUp: the loaded ones through AdoptLoadedBlobs when the
  // parameter brought some, else new ones of the expected shapes, filled by their fillers.
  void SetUpLearnableBlobs(const std::vector<ExpectedBlob>& expected, const std::string& why = "");
  // The usual pair: "weight" and, with `bias_term`, "bias", filled by `<param_field>.weight_filler`
  // and `.bias_filler` (`param_field`: "convolution_param", ...).
  static std::vector<ExpectedBlob> WeightAndBias(const std::string& param_field,
                                                 const std::vector<int>& weight_shape,
                                                 const FillerParameter& weight_filler,
                                                 bool bias_term, const std::vector<int>& bias_shape,
                                                 const FillerParameter& bias_filler,
                                                 bool any_shape_of_its_count = false);
  // Only the conversion to the layer's dtype, for layers whose Reshape checks the shapes.
  void ConvertLoadedBlobs();

  LayerParameter layer_param_;
  Phase phase_;
  std::vector<BlobPtr> blobs_;
  std::vector<bool> param_propagate_down_;
  std::vector<double> loss_;
  Device device_;
  DataType dtype_ = DataType::kFloat32;
  Workspace& workspace();
  // In Backward: whether the net asked for bottom k's ReLU (set_fused_relu_backward); if so the
  // layer must apply it to all of bottom k's gradient, with *negative_slope.
  bool TakeFusedReLUBackward(int bottom, float* negative_slope);
  // In Backward, where the layer writes param p's gradient afresh (not adding to it): the step
  // the solver handed over for p, or null; once taken, the layer must apply it to all of p.
  const SgdStep* TakeFusedSgdStep(int param);

 private:
  void CheckBlobCounts(const BlobVec& bottom, const BlobVec& top) const;
  void SetLossWeights(const BlobVec& top);
  Locator locator_;
  std::shared_ptr<Workspace> workspace_;
  bool forward_only_ = false;
  bool fused_relu_ = false;
  float fused_relu_slope_ = 0;
  std::vector<float> fused_relu_backward_;
  std::vector<char> fused_relu_backward_taken_;
  std::vector<SgdStep> fused_sgd_steps_;
  std::vector<char> fused_sgd_step_taken_;
};

// A layer with one bottom and one top of the same shape (element-wise functions).
class NeuronLayer : public Layer {
 public:
  using Layer::Layer;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowsInPlace() const override { return true; }
};

// A loss layer: bottom[0] predictions, bottom[1] targets; one scalar top whose loss weight
// defaults to 1.
class LossLayer : public Layer {
 public:
  using Layer::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  int ExactNumTopBlobs() const override { return 1; }
  // The label input gets no gradient unless the layer says otherwise.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

  // What a loss is divided by under loss_param.normalization, never less than 1 (Caffe's
  // GetNormalizer): FULL outer*inner, VALID the non-ignored count, BATCH_SIZE outer, NONE 1.
  static double Normalizer(LossParameter::NormalizationMode mode, int64_t outer_num,
                           int64_t inner_num, int64_t valid_count);
};

// Declares a layer's GPU kernels (ForwardGpu/BackwardGpu, defined in its .cu file) in builds with
// CUDA; without CUDA the layer keeps the CPU fallback. Put it at the end of the class body.
#ifdef CREMA_WITH_CUDA
#define CREMA_LAYER_GPU_KERNELS                                                          \
 public:                                                                                 \
  bool HasGpuKernels() const override { return true; }                                   \
                                                                                         \
 protected:                                                                              \
  void ForwardGpu(const ::crema::BlobVec& bottom, const ::crema::BlobVec& top) override; \
  void BackwardGpu(const ::crema::BlobVec& top, const std::vector<bool>& propagate_down, \
                   const ::crema::BlobVec& bottom) override
#else
#define CREMA_LAYER_GPU_KERNELS static_assert(true, "")
#endif

// Throws ConfigError with the layer's location prefix when `cond` is false.
#define CREMA_CHECK_PARAM(cond, field, ...)                                               \
  do {                                                                                    \
    if (!(cond))                                                                          \
      throw ::crema::ConfigError(this->ErrorPrefix(field) +                               \
                                 ::crema::StrCat(field, " " __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

// Throws ConfigError about the layer's inputs (shapes, counts), with its location prefix.
#define CREMA_CHECK_SHAPE(cond, ...)                                                             \
  do {                                                                                           \
    if (!(cond)) throw ::crema::ConfigError(this->ErrorPrefix() + ::crema::StrCat(__VA_ARGS__)); \
  } while (0)

}  // namespace crema
