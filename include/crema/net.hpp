#pragma once
// Net: a DAG of layers built from a NetParameter with Caffe's semantics — NetState filtering,
// automatic Split layers for blobs consumed more than once, in-place layers, parameter sharing
// by ParamSpec name, loss weights, and inference of which layers need backward.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/device.hpp"
#include "crema/layer.hpp"
#include "crema/proto.hpp"

namespace crema {

class ProtoSource;
struct MemoryPlanLayout;
class SharedActivationMemory;

// Thrown with --check-nan (Net::set_check_finite) at the first layer whose output, input
// gradient or parameter gradient holds a NaN or an infinity.
class NonFiniteError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Activation memory planning (src/net/README.md): intermediate blobs whose lifetimes do not
// overlap share buffers. What a user reads after Forward changes: only the net outputs and the
// kept blobs hold their values, so it is off unless asked (the CLI asks where it only reads
// outputs).
enum class MemoryPlan {
  kOff,        // every blob owns its memory
  kInference,  // forward only (Backward is refused): data buffers are reused
  kTraining,   // forward and backward: data stays live for backward; gradients share buffers
};

// Mixed precision (NetOptions::amp, docs/amp.md): the blobs between layers are stored in half
// precision (float16 or bfloat16) where the layer type's policy or the layer's amp_param says so;
// the layers compute in float32 on float32 stand-ins of those blobs, converted in before a layer
// runs and rounded back after (weights, parameter gradients and losses stay float32).
enum class Amp { kOff, kFloat16, kBFloat16 };
// "off", "fp16", "bf16".
const char* AmpName(Amp amp);
// The element type of half-precision storage under `amp` (float32 when off).
DataType AmpHalfType(Amp amp);
// AmpName's names -> true and *amp; false for anything else.
bool AmpFromName(const std::string& name, Amp* amp);
// The default of NetOptions::amp for nets built afterwards (process-wide; the CLI's --amp).
void SetAmpDefault(Amp amp);
Amp AmpDefault();

// The default of NetOptions::fuse_relu for nets built afterwards (process-wide).
void SetFuseReLUDefault(bool fuse);
bool FuseReLUDefault();
// The default of NetOptions::fuse_batch_norm for nets built afterwards (process-wide).
void SetFuseBatchNormDefault(bool fuse);
bool FuseBatchNormDefault();
// The default of NetOptions::fuse_sum for nets built afterwards (process-wide).
void SetFuseSumDefault(bool fuse);
bool FuseSumDefault();
// The default of NetOptions::fuse_depthwise for nets built afterwards (process-wide).
void SetFuseDepthwiseDefault(bool fuse);
bool FuseDepthwiseDefault();
// The default of NetOptions::channel_blocked for nets built afterwards (process-wide).
void SetChannelBlockedDefault(bool blocked);
bool ChannelBlockedDefault();

struct NetOptions {
  Device device;
  // Replaces the phase/level/stages of the NetParameter's state when set.
  bool override_state = false;
  NetState state;
  // Where the NetParameter came from (for file:line in errors); may be null.
  std::shared_ptr<const ProtoSource> source;
  // Log each layer's set-up (glog INFO); off for test nets built repeatedly.
  bool verbose = true;
  MemoryPlan memory_plan = MemoryPlan::kOff;
  // Blobs that keep their own memory (and values) under a memory plan.
  std::vector<std::string> keep_blobs;
  // Under an inference plan, layers that allow it run in place where that is legal (their
  // bottom is planned and read by nothing after them); results are identical.
  bool memory_plan_in_place = true;
  // Inference: a BatchNorm with global statistics that alone reads a Convolution's output (and
  // a one-bottom Scale that alone reads that BatchNorm's output) is folded into the convolution
  // (src/net/README.md): at the first Forward after the weights change, a copy of the
  // convolution with rewritten weights and bias runs instead and the folded layers are skipped,
  // their tops aliasing the convolution's. params(), saving and copying see the unfolded
  // weights; Backward is refused. After editing parameters by hand call SetFoldBatchNorm again.
  bool fold_batch_norm = false;
  // CPU nets: an in-place ReLU whose input only its producer wrote (a Convolution, InnerProduct,
  // Eltwise or Scale, also a convolution BatchNorm was folded into) runs inside that producer's
  // Forward, in the producer's last pass over its output, and the net skips the ReLU's Forward.
  // Backward the other way: where one later layer alone reads the ReLU's output and is a Concat,
  // Split or Pooling (MAX or AVE under crema's kernels), that layer computes the ReLU's gradient
  // as it writes its own bottom gradient, and the net skips the ReLU's Backward. Every blob holds
  // the same bits as without fusion, also after a partial ForwardFromTo or BackwardFromTo (only
  // a ReLU in the range run is fused). The default is true, or what SetFuseReLUDefault set (the
  // CLI's --fuse-relu).
  bool fuse_relu = FuseReLUDefault();
  // BatchNorm groups (src/net/README.md): a BatchNorm followed by an in-place per-channel Scale of
  // its top (and the ReLU fused into that Scale). The Scale reads the BatchNorm's kept output
  // instead of copying its input (one activation less per group); on the GPU, where the whole
  // group is in the pass run, the three run as one pass forward and two backward. Every blob,
  // gradient and parameter gradient is the same as unfused. The default is true, or what
  // SetFuseBatchNormDefault set (the CLI's --fuse-batch-norm).
  bool fuse_batch_norm = FuseBatchNormDefault();
  // CPU nets under an inference plan, with oneDNN (src/net/README.md): a planned blob that only
  // oneDNN layers and elementwise / channel-concatenating layers read stays in oneDNN's
  // channel-blocked layout between them (no reorder in and out at every layer); it is put back
  // to plain before any other layer reads it, and inputs, outputs and kept blobs are always
  // plain. The default is true, or what SetChannelBlockedDefault set (the CLI's
  // --channel-blocked).
  bool channel_blocked = ChannelBlockedDefault();
  // CPU nets under an inference plan, with oneDNN: a residual Eltwise SUM (coefficients 1, two
  // bottoms, run in place over the first) whose second bottom only a Convolution's output feeds
  // is computed inside that convolution (oneDNN's sum post-op, then the Eltwise's fused ReLU),
  // into the Eltwise's top; the Eltwise is skipped and the convolution's own top not written.
  // Outputs as unfused, bit for bit. The default is true, or what SetFuseSumDefault set (the
  // CLI's --fuse-sum).
  bool fuse_sum = FuseSumDefault();
  // CPU nets under an inference plan, with oneDNN on 16-channel blocks (AVX-512): a 3x3
  // depthwise Convolution (pad 1, stride 1 or 2) whose input only a 1x1 Convolution's output
  // feeds (MobileNet's conv2_1/sep -> conv2_2/dw), where that output is larger than half a core's
  // L2 cache, is computed by the 1x1 convolution row by row with its output kept in a ring of
  // three rows (math/pointwise_depthwise.hpp); the depthwise layer is skipped and the 1x1
  // convolution's own top not written. Each output takes the operations of oneDNN's two kernels
  // in their order (the same bits on MobileNet v1). The default is true, or what
  // SetFuseDepthwiseDefault set (the CLI's --fuse-depthwise).
  bool fuse_depthwise = FuseDepthwiseDefault();
  // Mixed precision: see Amp above. CUDA graphs stay off for such nets.
  Amp amp = AmpDefault();
};

// The outcome of copying weights into a net: the layers (with params) copied, and the layers
// skipped for a shape mismatch with the reason.
struct WeightsCopy {
  std::vector<std::string> copied;
  std::vector<std::pair<std::string, std::string>> skipped;
};

class Net {
 public:
  explicit Net(const NetParameter& param, const NetOptions& options = {});
  // Reads a prototxt (with source locations for errors), upgrades legacy formats and builds it
  // for `phase` (with `level` and `stages`).
  static std::unique_ptr<Net> FromFile(const std::string& path, Phase phase, int level = 0,
                                       const std::vector<std::string>& stages = {},
                                       const Device& device = Device::Cpu(),
                                       MemoryPlan memory_plan = MemoryPlan::kOff);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Forward over all layers; returns the total loss.
  double Forward();
  double ForwardFromTo(int start, int end);  // inclusive layer indices
  double ForwardFrom(int start) { return ForwardFromTo(start, num_layers() - 1); }
  double ForwardTo(int end) { return ForwardFromTo(0, end); }
  void Backward();
  void BackwardFromTo(int start, int end);  // start >= end, inclusive, walks backwards
  void BackwardFrom(int start) { BackwardFromTo(start, 0); }
  void BackwardTo(int end) { BackwardFromTo(num_layers() - 1, end); }
  double ForwardBackward() {
    double loss = Forward();
    Backward();
    return loss;
  }
  // CUDA graphs (src/net/iteration_graph.hpp). The layers before the first one with a bottom
  // (the data layers) fill their tops on the host side: they run before a replay, uncaptured.
  int num_input_layers() const;
  // "" when layers num_input_layers().. may be captured into a graph and replayed; else why not,
  // naming the first layer that prevents it.
  std::string GraphCaptureBlocker() const;
  // The blobs' and params' memory and shapes: a graph is valid only while this is unchanged.
  std::vector<uintptr_t> GraphSignature() const;
  // Around a replay of layers `start`..: before, host-side changes of blobs and params go to the
  // device; after, the device copies are marked current and each layer's CheckForward runs.
  void BeforeGraphReplay();
  void AfterGraphReplay(int start);
  // The weighted loss of the loss layers `start`..`end` as their last Forward left it.
  double WeightedLoss(int start, int end) const;
  // The whole net's weighted loss computed on the device into `*out` (device memory, GPU nets):
  // what a captured update reads to skip itself on a non-finite loss.
  void DeviceWeightedLoss(double* out) const;
  // The layer whose Forward or Backward runs now, -1 outside a pass (names what broke a capture).
  int running_layer() const { return running_layer_; }

  // Mixed precision (NetOptions::amp). What layer i's SetUp, Reshape, Forward and Backward are
  // given: its bottoms and tops, where each blob stored in half precision is replaced by its
  // float32 stand-in (the blobs themselves when amp is off).
  Amp amp() const { return amp_; }
  const BlobVec& layer_bottoms(int i) const { return layer_bottoms_[i]; }
  const BlobVec& layer_tops(int i) const { return layer_tops_[i]; }
  // Layer i's Backward alone (crema time's per-layer timing), whether or not the net would run
  // it, through the stand-ins.
  void BackwardLayer(int i);
  // The loss scale of FP16 training (the solver's loss scaler): Backward starts from the loss
  // weights times `scale`, so every gradient is `scale` times the true one; the loss Forward
  // returns is not scaled. 1 unless set.
  void set_loss_scale(double scale);
  double loss_scale() const { return loss_scale_; }

  // Re-runs every layer's Reshape (after an input blob changed shape), then the memory plan.
  void Reshape();
  // Plans the activation memory (kOff gives every blob its own again); the blobs named in
  // `keep_blobs` keep their values. ConfigError for an unknown blob name.
  void SetMemoryPlan(MemoryPlan mode, const std::vector<std::string>& keep_blobs = {});
  MemoryPlan memory_plan() const { return memory_plan_; }
  // The planned buffers come from `memory`, shared with other nets that never run at the same
  // time as this one (src/net/memory_plan.hpp); null gives the net buffers of its own again.
  void ShareActivationMemory(std::shared_ptr<SharedActivationMemory> memory);
  // The memory plan applied now (src/net/memory_plan.hpp), or null without one.
  const MemoryPlanLayout* memory_layout() const { return memory_layout_.get(); }
  // Bytes of the planned buffers (data and diff) this net uses now.
  size_t planned_bytes() const;
  // Folds BatchNorm (+ Scale) into the preceding convolutions or undoes it
  // (NetOptions::fold_batch_norm); the weights are (re)folded at the next Forward.
  void SetFoldBatchNorm(bool fold);
  bool fold_batch_norm() const { return fold_batch_norm_; }
  // Per layer: the index of the Convolution a BatchNorm or Scale is folded into, else -1.
  const std::vector<int>& folded_into() const { return folded_into_; }
  // The layer object whose Forward runs for layer i: the folded copy of a convolution that
  // BatchNorm was folded into (built at the first Forward), else layers()[i].
  Layer* forward_layer(int layer_id) const {
    return folded_convs_[layer_id] ? folded_convs_[layer_id].get() : layers_[layer_id].get();
  }

  // Fuses in-place ReLUs into their producers or undoes it (NetOptions::fuse_relu).
  void SetFuseReLU(bool fuse);
  bool fuse_relu() const { return fuse_relu_; }
  // Per layer: for a fused ReLU, the index of the layer that applies it, else -1.
  const std::vector<int>& relu_fused_into() const { return relu_fused_into_; }
  // Per layer: the layer computing this ReLU's gradient (NetOptions::fuse_relu, CPU), else -1.
  const std::vector<int>& relu_backward_fused_into() const { return relu_backward_fused_into_; }
  // Forms BatchNorm groups or undoes it (NetOptions::fuse_batch_norm).
  void SetFuseBatchNorm(bool fuse);
  bool fuse_batch_norm() const { return fuse_batch_norm_; }
  // Per layer: for the Scale and ReLU of a BatchNorm group, the BatchNorm's index, else -1.
  const std::vector<int>& fused_into_batch_norm() const { return fused_into_batch_norm_; }
  // Eltwise SUM fusion into convolutions, or not (NetOptions::fuse_sum); per layer: for a fused
  // Eltwise, the index of the Convolution that computes it, else -1.
  void SetFuseSum(bool fuse);
  bool fuse_sum() const { return fuse_sum_; }
  const std::vector<int>& sum_fused_into() const { return sum_fused_into_; }
  // Depthwise fusion into 1x1 convolutions, or not (NetOptions::fuse_depthwise; re-plans the
  // memory); per layer: for a fused depthwise Convolution, the index of the 1x1 Convolution that
  // computes it, else -1.
  void SetFuseDepthwise(bool fuse);
  bool fuse_depthwise() const { return fuse_depthwise_; }
  const std::vector<int>& depthwise_fused_into() const { return depthwise_fused_into_; }
  // Plain SGD's step fused into the Backward that writes a param's gradient (Layer::SgdStep):
  // the solver hands `steps` (one per learnable param, history null for none) to the layers
  // for the next Backward, where a param has one layer (not shared) that supports it, on the
  // CPU, without debug info or finite checks (those read the gradients after the Backward).
  // FusedSgdStepsTaken then says, per learnable param, which were applied, and clears them.
  void SetFusedSgdSteps(const std::vector<Layer::SgdStep>& steps);
  std::vector<char> FusedSgdStepsTaken();
  // Channel-blocked layouts between oneDNN layers, or not (NetOptions::channel_blocked).
  void SetChannelBlocked(bool blocked);
  bool channel_blocked() const { return channel_blocked_; }

  // Decides, before the first real pass, the CPU engine of every layer that races them
  // (--cpu_engine auto, Layer::cpu_engine_choice): the layer's forward (and backward where the
  // net runs it) on scratch inputs and outputs of its shapes until its races end; its parameter
  // gradients are put back, so blobs, parameters and statistics are as they were. A no-op on the
  // GPU and under the other policies. The solver calls it before its first iteration.
  void PrepareCpuEngines();

  // Zeroes every learnable parameter's gradient. `lazily` (the solver's and `crema time`'s
  // iterations): through Blob::SetDiffZeroLazily, so that the layers writing a gradient first
  // overwrite it instead of adding; a pointer taken before (a numpy view of the diff) then still
  // shows the old values until an accessor is called, hence not the default.
  void ClearParamDiffs(bool lazily = false);
  // data -= diff for every learnable parameter that owns its memory.
  void Update();
  // What Update does besides the subtraction, for a solver whose own step already subtracted.
  void ParamsUpdated();
  // Makes this net use `other`'s learned parameter memory (test nets share the train net's).
  void ShareTrainedLayersWith(const Net& other);

  // Copies parameters layer by layer, by name. Layers absent from `param` keep their values;
  // a shape mismatch is a ConfigError naming the layer, the blob index and both shapes.
  void CopyTrainedLayersFrom(const NetParameter& param);
  // Binary .caffemodel (NetParameter) or HDF5 (.h5/.caffemodel.h5) weights.
  void CopyTrainedLayersFrom(const std::string& path);
  // As above; with `skip_mismatched` a layer whose blobs differ in number or shape is left as
  // it is (its fillers) instead. Says which layers were copied and which skipped.
  WeightsCopy CopyTrainedLayersFrom(const NetParameter& param, bool skip_mismatched);
  WeightsCopy CopyTrainedLayersFrom(const std::string& path, bool skip_mismatched);
  // Sets lr_mult 0 on every param blob of these layers and re-infers which layers need
  // backward, as if the prototxt had said `param { lr_mult: 0 }` for each blob (Caffe's
  // param_need_backward). ConfigError when a frozen blob is shared with a layer not frozen.
  void FreezeLayers(const std::vector<std::string>& layer_names);
  void ToProto(NetParameter* param, bool write_diff = false) const;
  void ToHDF5(const std::string& path, bool write_diff = false) const;

  const std::string& name() const { return name_; }
  Phase phase() const { return phase_; }
  const Device& device() const { return device_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  const std::vector<BlobPtr>& blobs() const { return blobs_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<BlobVec>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<BlobVec>& top_vecs() const { return top_vecs_; }
  const std::vector<int>& bottom_ids(int layer) const { return bottom_id_vecs_[layer]; }
  const std::vector<int>& top_id_vec(int layer) const { return top_id_vecs_[layer]; }
  const std::vector<std::vector<bool>>& bottom_need_backward() const {
    return bottom_need_backward_;
  }
  const std::vector<bool>& layer_need_backward() const { return layer_need_backward_; }
  const std::vector<double>& blob_loss_weights() const { return blob_loss_weights_; }
  // Every parameter blob of every layer, in layer order (shared ones repeated).
  const std::vector<BlobPtr>& params() const { return params_; }
  // Parameters that own their memory (shared ones appear once), with their multipliers.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<bool>& has_params_lr() const { return has_params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }
  const std::vector<bool>& has_params_decay() const { return has_params_decay_; }
  // For each entry of params(): the index in params() of its owner, or -1 when it owns itself.
  const std::vector<int>& param_owners() const { return param_owners_; }
  const std::vector<std::string>& param_display_names() const { return param_display_names_; }
  // (layer index, blob index within the layer) of each entry of params().
  const std::vector<std::pair<int, int>>& param_layer_indices() const {
    return param_layer_indices_;
  }
  const BlobVec& input_blobs() const { return net_input_blobs_; }
  const BlobVec& output_blobs() const { return net_output_blobs_; }
  const std::vector<int>& input_blob_indices() const { return net_input_blob_indices_; }
  const std::vector<int>& output_blob_indices() const { return net_output_blob_indices_; }
  bool has_blob(const std::string& name) const { return blob_names_index_.count(name) > 0; }
  // Null when absent.
  BlobPtr blob_by_name(const std::string& name) const;
  bool has_layer(const std::string& name) const { return layer_names_index_.count(name) > 0; }
  Layer* layer_by_name(const std::string& name) const;
  int layer_index(const std::string& name) const;  // -1 when absent
  void set_debug_info(bool value) { debug_info_ = value; }
  // After every layer's Forward (its tops) and Backward (its bottoms' and params' gradients),
  // checks that all values are finite; throws NonFiniteError naming the layer and the blob.
  void set_check_finite(bool value) { check_finite_ = value; }
  // The NetParameter this net was built from, after filtering and split insertion.
  const NetParameter& filtered_param() const { return filtered_param_; }

 private:
  void Init(const NetParameter& param, const NetOptions& options);
  void AppendTop(const NetParameter& param, int layer_id, int top_id,
                 std::map<std::string, int>* blob_name_to_idx);
  int AppendBottom(const NetParameter& param, int layer_id, int bottom_id,
                   std::map<std::string, int>* available_blobs,
                   std::map<std::string, int>* blob_name_to_idx);
  void AppendParam(const NetParameter& param, int layer_id, int param_id);
  // Which layers and bottoms need backward, from param_need_backward_ and the graph.
  void InferBackward(bool force_backward, bool verbose);
  void CheckFinite(int layer_id, bool forward) const;
  void ForwardDebugInfo(int layer_id);
  void BackwardDebugInfo(int layer_id);
  void UpdateDebugInfo(int param_id);
  // Puts the blobs into the planned buffers (sizes from the current shapes).
  void ApplyMemoryPlan();
  // After a full forward: a planned blob that left its buffer (it grew) asks for a re-plan
  // before the next full forward.
  void CheckMemoryPlan();
  // Finds the layers to fold (static: the graph, the phase and the kept blobs).
  void PlanFold();
  // Builds the folded convolutions from the current weights.
  void ApplyFold();
  // Finds the ReLUs to fuse into their producers (after PlanFold: folded layers are skipped),
  // then the BatchNorm groups.
  void PlanFuseReLU();
  // Layer i's blob when it is an in-place ReLU of a blob that carries no loss, else -1.
  int InPlaceReLUBlob(int layer_id) const;
  // Which planned blobs may be channel-blocked (net_layout.cpp; after the memory plan, with
  // the current shapes), and before layer i's Forward: blocked bottoms it cannot read put back
  // to plain; after it, the layout of the tops it wrote. Likewise around its Backward: blocked
  // gradients and values it cannot read put back to plain, then the layout of the bottom
  // gradients it wrote.
  void PlanChannelBlocked();
  void ChannelBlockedBefore(int layer_id, Layer* layer);
  void ChannelBlockedAfter(int layer_id);
  void ChannelBlockedBackwardBefore(int layer_id, Layer* layer);
  void ChannelBlockedBackwardAfter(int layer_id);
  // Finds the Eltwise SUMs to fuse into convolutions (after the memory plan and PlanFuseReLU),
  // and around the Forward of such a convolution: asks it to (or not), and records whether it
  // did (net_fuse.cpp).
  void PlanFuseSum();
  void PrepareFusedSum(int conv_id, int end, Layer* layer);
  void AfterFusedSum(int conv_id, Layer* layer);
  // Finds the depthwise convolutions to compute in the 1x1 convolution before them (after the
  // folds and PlanFuseReLU, before the memory plan, which keeps the depthwise layer's top apart
  // from the 1x1 convolution's input), and around the Forward of such a 1x1 convolution: asks it
  // to (or not), and records whether it did (net_fuse.cpp).
  void PlanFuseDepthwise();
  void PrepareFusedDepthwise(int conv_id, int end, Layer* layer);
  void AfterFusedDepthwise(int conv_id, Layer* layer);
  // Finds the BatchNorm groups (after PlanFuseReLU: a group takes the ReLU fused into its Scale).
  void PlanBatchNormGroups();
  // Finds the ReLUs whose Backward their one reader computes (Layer::SupportsFusedReLUBackward,
  // CPU nets), and around that reader's Backward in [end, start]: asks it to, and marks the
  // ReLUs it took done (net_fuse.cpp).
  void PlanFuseReLUBackward();
  bool PrepareFusedReLUBackward(int layer_id, int end);
  void AfterFusedReLUBackward(int layer_id);
  // When layer i is the last of a GPU BatchNorm group whose Forward ran fused and the whole group
  // is in [end, start] with consistent backward needs: the group's BatchNorm, else -1.
  int FusedBackwardGroup(int i, int start, int end) const;
  // The only layer reading the value layer `producer` writes into blob `blob`, else -1.
  int SoleReader(int producer, int blob) const;
  // Mixed precision (net_amp.cpp). The storage type of layer i's new tops.
  DataType AmpTopStorage(int layer_id, bool is_output) const;
  // Builds layer i's layer_bottoms_/layer_tops_, creating stand-ins for its half-precision tops
  // (`output_names`: the blobs nothing consumes, which stay float32).
  void AmpSetUpLayer(int layer_id, const std::set<std::string>& output_names);
  // The blobs of layer i that have stand-ins, each once; AmpBind gives those stand-ins float32
  // memory in the net's scratch (layers run one at a time), shaped as their blobs.
  std::vector<int> AmpBlobs(int layer_id) const;
  void AmpBind(int layer_id);
  // The bytes a float32 stand-in of `blob` (data or diff) takes in that scratch.
  static size_t AmpScratchBytes(const Blob& blob);
  // Before layer i runs: AmpBind, then the blobs' values converted in (Forward: the bottoms' data;
  // Backward: the bottoms' data and the tops' data and diff). After: the tops' data (Forward), or
  // the gradients of the bottoms in `propagate_down` (Backward), rounded back into the blobs.
  void AmpBefore(int layer_id, bool backward);
  void AmpAfter(int layer_id, bool backward, const std::vector<bool>* propagate_down = nullptr);
  // Reshape of layer i through its stand-ins.
  void ReshapeLayer(int layer_id);
  std::string LayerLocation(int layer_param_index, const std::string& field) const;
  std::string ErrorAt(int layer_param_index, const std::string& field) const;

  std::string name_;
  Phase phase_ = TEST;
  Device device_;
  std::shared_ptr<const ProtoSource> source_;
  // The parameter as read, for source locations (kept only when source_ is set).
  NetParameter original_param_;
  NetParameter filtered_param_;
  // For each layer of filtered_param_, the index of the layer in the original parameter
  // (-1 for inserted Split layers), to find its source location.
  std::vector<int> original_layer_index_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_names_index_;
  std::vector<bool> layer_need_backward_;
  std::vector<BlobPtr> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_names_index_;
  std::vector<bool> blob_need_backward_;
  std::vector<BlobVec> bottom_vecs_;
  std::vector<std::vector<int>> bottom_id_vecs_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  // Per layer and param blob: lr_mult != 0 (false once frozen).
  std::vector<std::vector<bool>> param_need_backward_;
  std::vector<BlobVec> top_vecs_;
  std::vector<std::vector<int>> top_id_vecs_;
  std::vector<double> blob_loss_weights_;
  std::vector<std::vector<int>> param_id_vecs_;
  std::vector<int> param_owners_;
  std::vector<std::string> param_display_names_;
  std::vector<std::pair<int, int>> param_layer_indices_;
  std::map<std::string, int> param_names_index_;
  std::vector<int> net_input_blob_indices_;
  std::vector<int> net_output_blob_indices_;
  BlobVec net_input_blobs_;
  BlobVec net_output_blobs_;
  std::vector<BlobPtr> params_;
  std::vector<Blob*> learnable_params_;
  std::vector<int> learnable_param_ids_;
  std::vector<float> params_lr_;
  std::vector<bool> has_params_lr_;
  std::vector<float> params_weight_decay_;
  std::vector<bool> has_params_decay_;
  bool debug_info_ = false;
  bool check_finite_ = false;
  int running_layer_ = -1;
  MemoryPlan memory_plan_ = MemoryPlan::kOff;
  std::vector<std::string> keep_blobs_;
  bool memory_plan_in_place_ = true;
  std::unique_ptr<MemoryPlanLayout> memory_layout_;
  // Per blob, the planned buffer it was given (empty when none).
  std::vector<std::weak_ptr<SyncedMemory>> planned_data_, planned_diff_;
  bool memory_plan_stale_ = false;
  std::shared_ptr<SharedActivationMemory> shared_memory_;
  uint64_t shared_memory_generation_ = 0;
  bool fold_batch_norm_ = false;
  std::vector<int> folded_into_;
  // Per layer: the folded copy of a convolution that runs instead of it (null when none).
  std::vector<std::unique_ptr<Layer>> folded_convs_;
  bool fold_stale_ = false;
  bool fuse_relu_ = true;
  std::vector<int> relu_fused_into_;
  // Per layer: the fused ReLU it applies to its top (index), else -1.
  std::vector<int> fused_relu_of_;
  std::vector<int> relu_backward_fused_into_;
  // Per layer: the in-place ReLUs whose Backward it may compute, as (its bottom, the ReLU).
  std::vector<std::vector<std::pair<int, int>>> relu_backward_of_;
  bool fuse_batch_norm_ = true;
  bool channel_blocked_ = true;
  bool fuse_sum_ = true;
  // Per Eltwise layer: the Convolution computing it (else -1), and whether it did in this pass;
  // per Convolution: the Eltwise it computes, else -1.
  std::vector<int> sum_fused_into_, fused_sum_of_;
  std::vector<char> sum_ran_fused_;
  bool fuse_depthwise_ = true;
  // Per depthwise Convolution: the 1x1 Convolution computing it (else -1), and whether it did in
  // this pass; per 1x1 Convolution: the depthwise one it computes, else -1.
  std::vector<int> depthwise_fused_into_, fused_depthwise_of_;
  std::vector<char> depthwise_ran_fused_;
  // Whether any blob may be channel-blocked now, and per blob whether its value arrives blocked
  // at its readers (a oneDNN layer writes it, or a pass-through layer from such values).
  bool channel_blocked_active_ = false;
  std::vector<char> channel_block_arrives_;
  // The channel block a pass-through layer's tops (bottom gradients) get from the Forward
  // (Backward) running (0: plain).
  int channel_block_written_ = 0;
  // Per BatchNorm layer: the Scale of its group, else -1.
  std::vector<int> group_scale_of_;
  std::vector<int> fused_into_batch_norm_;
  // Per layer: its Backward already ran inside its group's (BackwardFromTo's bookkeeping).
  std::vector<char> backward_done_;
  // Scratch shared by the layers (layers run one at a time).
  std::shared_ptr<Workspace> workspace_;
  Amp amp_ = Amp::kOff;
  double loss_scale_ = 1;
  std::vector<BlobVec> layer_bottoms_, layer_tops_;
  // Per blob: its float32 stand-in when it is stored in half precision, else null.
  std::vector<std::unique_ptr<Blob>> standins_;
  // The stand-ins' memory while a layer runs (one layer at a time).
  std::shared_ptr<SyncedMemory> amp_scratch_;
};

// NetState filtering: keeps the layers whose include/exclude rules match `param.state()`.
void FilterNet(const NetParameter& param, NetParameter* filtered,
               std::vector<int>* original_index = nullptr);
bool StateMeetsRule(const NetState& state, const NetStateRule& rule, const std::string& layer);
// Given a layer index and a field path, the prefix of an error message ("file:line:col: layer
// "x" (Type): ").
using ErrorPrefixFn = std::function<std::string(int layer_index, const std::string& field)>;
// Inserts Split layers for blobs consumed by more than one layer (Caffe's naming). When
// `original_index` is given it maps input layers to source indices and is rewritten for the
// output (-1 for inserted splits).
void InsertSplits(const NetParameter& param, NetParameter* split_param,
                  std::vector<int>* original_index = nullptr, const ErrorPrefixFn& where = nullptr);
std::string SplitLayerName(const std::string& layer_name, const std::string& blob_name,
                           int blob_idx);
std::string SplitBlobName(const std::string& layer_name, const std::string& blob_name, int blob_idx,
                          int split_idx);

}  // namespace crema
