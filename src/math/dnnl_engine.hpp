#pragma once
// oneDNN (libdnnl) as an optional CPU engine of Convolution, Pooling and InnerProduct, chosen per
// layer the way cuDNN is on the GPU.
//
// The CPU engine policy (process-wide; --cpu_engine or CREMA_CPU_ENGINE):
//   auto  (default) per layer, input shape and direction (forward, backward), the first passes
//         run crema's own kernels and oneDNN's in turn (and, for 3x3 convolutions of stride 1
//         on AVX-512, oneDNN's Winograd convolution), timed; the fastest is kept and the choice
//         logged once (INFO);
//   caffe never oneDNN: crema's own kernels, bit-reproducible as before;
//   dnnl  oneDNN wherever it supports the layer (its direct convolution, never Winograd).
// A layer's `engine` field (Caffe's choice of cuDNN or not) does not change it. Deterministic mode
// (gpu::Deterministic) always runs crema's kernels. Float32 only; other types always run crema's
// kernels. oneDNN's results may differ from crema's in the last bits and between thread counts.
//
// Only files compiled with CREMA_WITH_DNNL (src/math/dnnl_*.cpp, layers/*/dnnl_*.cpp; see
// CMakeLists.txt) see the oneDNN part at the end; the policy part is plain C++.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/host_memory.hpp"

namespace crema {

enum class CpuEngine { kAuto, kCaffe, kDnnl };

// "auto", "caffe" or "dnnl" -> the policy; ConfigError naming `what` (e.g. "--cpu_engine")
// otherwise.
CpuEngine ParseCpuEngine(const std::string& text, const std::string& what);
const char* CpuEngineName(CpuEngine engine);
// The process-wide policy. Until SetCpuEngine is called it comes from CREMA_CPU_ENGINE (auto
// when unset; a ConfigError when invalid).
CpuEngine GetCpuEngine();
void SetCpuEngine(CpuEngine engine);
// SetCpuEngine(engine) for a scope; the policy before it at its end (tests).
class ScopedCpuEngine {
 public:
  explicit ScopedCpuEngine(CpuEngine engine) : saved_(GetCpuEngine()) { SetCpuEngine(engine); }
  ~ScopedCpuEngine() { SetCpuEngine(saved_); }
  ScopedCpuEngine(const ScopedCpuEngine&) = delete;
  ScopedCpuEngine& operator=(const ScopedCpuEngine&) = delete;

 private:
  CpuEngine saved_;
};
// Whether this build has oneDNN (CREMA_DNNL found at configure time).
bool DnnlBuilt();

// c = alpha op(a) op(b) + beta c for row-major float matrices with oneDNN's sgemm, which runs the
// small and skinny products of crema's own convolution kernels 1.0-1.8x faster than OpenBLAS's at
// one thread (im2col products such as 50 x 512 x 500, 1x1 convolutions with 16 or 64 channels).
// Returns false without oneDNN in the build, for empty sizes, or when oneDNN refuses; the caller
// then runs BLAS (cpu::Gemm does).
bool DnnlSgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc);

// The policy for one layer: the process-wide one; without oneDNN in the build, and in
// deterministic mode (--deterministic, solver `deterministic: true`), always kCaffe. A layer's
// `engine` field does not change it: in Caffe it chooses between Caffe's kernels and cuDNN's (a
// GPU choice; published nets set CAFFE on depthwise convolutions to keep them off cuDNN's slow
// grouped convolutions).
CpuEngine LayerCpuEngine();

// The kernels a layer's CPU pass may run: crema's own, oneDNN's (its direct convolution where it
// has a choice), oneDNN's Winograd convolution (F(4x4, 3x3): 3x3 kernels, stride 1, on
// AVX-512; within float rounding of the direct one, about twice its rounding error), or crema's
// kernels on oneDNN's channel-blocked layout (in inference on AVX-512: 3x3 convolutions of
// stride 1 and pad 1, math/blocked_conv.hpp, and 1x1 ones of stride 1, math/pointwise_depthwise.hpp
// PointwiseForward; like oneDNN's, they read and write the blocked layout).
enum class CpuKernel : int { kCrema = 0, kDnnl = 1, kDnnlWinograd = 2, kCremaBlocked = 3 };
// "crema", "oneDNN", "oneDNN-Winograd", "crema-blocked".
const char* CpuKernelName(CpuKernel kernel);

// The per-layer choice of `auto`: for each (direction, input shape) a race of the layer's kernels
// (crema's and oneDNN's, and oneDNN's Winograd and crema's blocked one where the layer offers
// them), three passes each run in turn (the first of each untimed: caches, primitive creation),
// keeping the fastest by its best time; it ends after two passes each when one kernel took under
// 1/kClearMargin of every other's time.
class CpuEngineChoice {
 public:
  // One of a layer's kernels for a pass: a reference to a callable that outlives the call (a
  // lambda at the call site), or none. Unlike a std::function it allocates nothing (a lambda of
  // three references is heap-allocated there), on every layer's pass of every iteration.
  class Pass {
   public:
    Pass() = default;
    Pass(std::nullptr_t) {}  // NOLINT: none
    // An empty std::function is none.
    Pass(const std::function<void()>& f)  // NOLINT: implicit, as a std::function parameter was
        : object_(f ? &f : nullptr), call_(f ? &Call<const std::function<void()>> : nullptr) {}
    template <typename F,
              typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Pass> &&
                                          !std::is_same_v<std::decay_t<F>, std::function<void()>>>>
    Pass(F&& f)  // NOLINT: implicit, as a std::function parameter was
        : object_(&f), call_(&Call<std::remove_reference_t<F>>) {}
    explicit operator bool() const { return call_ != nullptr; }
    void operator()() const { call_(object_); }

   private:
    template <typename F>
    static void Call(const void* object) {
      (*const_cast<F*>(static_cast<const F*>(object)))();
    }
    const void* object_ = nullptr;
    void (*call_)(const void*) = nullptr;
  };

  CpuEngineChoice() = default;
  // A copy has the races but not the last one looked up (a node of the original's map).
  CpuEngineChoice(const CpuEngineChoice& other)
      : races_(other.races_), last_(other.last_), crema_races_(other.crema_races_) {}
  CpuEngineChoice& operator=(const CpuEngineChoice& other) {
    races_ = other.races_;
    last_ = other.last_;
    crema_races_ = other.crema_races_;
    found_ = nullptr;
    return *this;
  }

  // Runs one pass, `crema`, `dnnl`, `winograd` or `blocked` (none: the layer has none for these
  // shapes), as `policy` says: kCaffe crema, kDnnl dnnl, kAuto the race. `layer` names the layer
  // in the log line, `direction` is "forward" or "backward". A decision for a kernel the layer
  // offers none of (a .solverstate or choice cache from another CPU) runs dnnl.
  void Run(CpuEngine policy, const std::string& layer, const char* direction,
           const std::vector<int>& shape, Pass crema, Pass dnnl, Pass winograd = nullptr,
           Pass blocked = nullptr);
  // Whether crema's kernel enters the races not started yet (default true). Net::
  // PlanChannelBlocked turns it off for a layer whose input arrives channel-blocked: crema's
  // kernel reads plain data, so the net would convert the input first and the next layer reorder
  // crema's plain output back, costs its timed passes do not include (SqueezeNet v1.1 at batch 1
  // on one thread: 5.5 ms a pass with the 1x1 convolutions crema's kernel won alone, 4.7-5.0 with
  // oneDNN's kept). Then the blocked kernels race (oneDNN's direct and Winograd, crema's blocked),
  // or oneDNN's runs without a race where the layer has no other.
  void set_crema_races(bool on) { crema_races_ = on; }
  bool crema_races() const { return crema_races_; }
  // The kernel of the last pass run: CpuKernelName, or "" before the first.
  const char* last() const { return last_; }
  // Whether the race of this direction and input shape has started and is not decided yet, and
  // whether it is decided (then *kernel, when given, is the kernel decided).
  bool Racing(const char* direction, const std::vector<int>& shape) const;
  bool Decided(const char* direction, const std::vector<int>& shape,
               CpuKernel* kernel = nullptr) const;
  // Whether the next Run with `policy` runs a kernel that reads the channel-blocked layout (one of
  // oneDNN's or crema's blocked one: kDnnl, a race decided for one, or a race's next pass).
  bool NextRunsDnnl(CpuEngine policy, const char* direction, const std::vector<int>& shape) const;
  // The decided races, to keep them across processes (a .solverstate: resuming then runs the
  // kernels the interrupted run chose), and taking one back (a race not run yet).
  struct Decision {
    std::string direction;
    std::vector<int> shape;
    CpuKernel kernel = CpuKernel::kCrema;
  };
  std::vector<Decision> Decisions() const;
  void Restore(const Decision& decision);
  // The most kernels a race has (crema's, oneDNN's direct and Winograd ones, crema's blocked
  // one), and the most passes it takes (a layer's scratch passes before training run up to this
  // many).
  static constexpr int kMaxKernels = 4;
  static constexpr int kMaxRacePasses = 3 * kMaxKernels;

 private:
  struct Race {
    CpuKernel kernels[kMaxKernels] = {};  // the kernels raced, in the order they run
    int count = 0;                        // how many (0: not started)
    int pass = 0;
    double best[kMaxKernels] = {0, 0, 0, 0};
    bool decided = false;
    CpuKernel kernel = CpuKernel::kCrema;
  };
  static constexpr int kPassesPerKernel = 3;
  static_assert(kMaxRacePasses == kPassesPerKernel * kMaxKernels);
  static constexpr double kClearMargin = 1.5;
  // The race of (direction, shape), or null where none has started; Get starts one. The last
  // race found is remembered (std::map's nodes stay where they are): a pass asks for the same
  // one two or three times, and a map lookup builds its key (a copy of the shape).
  Race* Find(const char* direction, const std::vector<int>& shape) const;
  Race& Get(const char* direction, const std::vector<int>& shape);
  std::map<std::pair<std::string, std::vector<int>>, Race> races_;  // (direction, shape)
  const char* last_ = "";
  bool crema_races_ = true;
  mutable Race* found_ = nullptr;  // the last race found, with its key:
  mutable std::string found_direction_;
  mutable std::vector<int> found_shape_;
};

// "2x3x32x32".
std::string ShapeText(const std::vector<int>& shape);

class Workspace;

// Channel-blocked layouts between the oneDNN layers of an inference net (src/net/net_layout.cpp).
// The channel block of oneDNN's convolutions on this CPU: 16 with AVX-512, 8 with AVX2 (at the
// level math/cpu_isa.hpp allows); 0 without oneDNN in the build or on older CPUs (then nothing is
// blocked).
int ChannelBlock();
// Whether a float32 tensor of `shape` may be held channel-blocked: 4-D, channels a multiple of
// ChannelBlock(), more than one position (with one, both layouts are the same bytes).
bool ChannelBlockable(const std::vector<int>& shape);
// Puts a tensor of `shape` held channel-blocked by `block` back into the plain layout, in place
// (through scratch from `ws`).
void ChannelBlockedToPlain(const std::vector<int>& shape, int block, float* data, Workspace* ws);

// The backward passes of a layer with weights, as DnnlWeightedPrimitives::Backward runs them.
// dw += dW(x, dy) and db += db(dy) where they are not null (an output whose `overwrite` is set,
// its buffer zeroed lazily by Blob::mutable_cpu_diff_to_add, is written instead, without the
// scratch copy and the addition); then dx = op^T(dy, w) (overwrites) where dx is not null.
// `src_block` / `dst_block` > 0: x and dx / dy are channel-blocked by that instead of plain.
struct DnnlBackwardArgs {
  const float* x = nullptr;
  const float* dy = nullptr;
  const float* w = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
  float* dx = nullptr;
  bool overwrite_dw = false, overwrite_db = false;
  int src_block = 0, dst_block = 0;
};

}  // namespace crema

#ifdef CREMA_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "crema/error.hpp"

namespace crema {

// The process-wide CPU engine and the calling thread's stream (in-order; oneDNN's OpenMP threads
// are crema's).
dnnl::engine& DnnlEngine();
dnnl::stream& DnnlStream();

// Primitive attributes with a user-provided scratchpad (carved from the net's workspace).
dnnl::primitive_attr DnnlUserScratchpad();

// float32 descriptors: crema's plain row-major layout (nchw, oihw, goihw, ...), or the layout a
// primitive picks (format_tag::any).
dnnl::memory::desc DnnlPlain(const dnnl::memory::dims& dims);
dnnl::memory::desc DnnlAny(const dnnl::memory::dims& dims);
// A 4-D tensor channel-blocked by `block` (nChw8c, nChw16c); 0 gives DnnlPlain.
dnnl::memory::desc DnnlChannelBlocked(const dnnl::memory::dims& dims, int block);

// Whether two descriptors of the same tensor place every element at the same byte: equal ones,
// and plain against channel-blocked (DnnlChannelBlocked) where every plane is one element and the
// channels are whole blocks (a global pooling's output, an inner product's input).
bool DnnlSameBytes(const dnnl::memory::desc& a, const dnnl::memory::desc& b);

// One tensor argument of a primitive: the caller's plain memory and the layout the primitive
// chose; when they differ (DnnlSameBytes), the tensor goes through a reorder in scratch memory. An
// output with `accumulate` is added (+=) to the caller's memory instead of overwriting it; an
// output with null `data` is computed and dropped; an output with `read_too` is also read by the
// primitive (a sum post-op), so its value is reordered in first as well.
struct DnnlOperand {
  int arg;
  dnnl::memory::desc user, want;
  void* data;
  bool output = false;
  bool accumulate = false;
  bool read_too = false;
};

// One primitive call: the primitive, its scratchpad's descriptor and its operands.
struct DnnlStep {
  const dnnl::primitive* primitive;
  dnnl::memory::desc scratchpad;
  std::vector<DnnlOperand> operands;
};

// Runs the steps in turn and waits for them; their scratchpads (DnnlUserScratchpad) and the
// reorder buffers are carved from one block of the workspace. An input that a later step reads
// again from the same buffer in the same layouts (a convolution's dy, in its weight and data
// gradients) is reordered once, for both; the other buffers of one step overlap the next step's.
void DnnlExecute(const std::vector<DnnlStep>& steps, Workspace* ws);
// One step.
void DnnlExecute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
                 const std::vector<DnnlOperand>& operands, Workspace* ws);

// The three passes of a layer with weights and an optional bias (Convolution, InnerProduct) on
// crema's plain tensors `layout`, through primitives whose descriptors may want other layouts.
struct DnnlWeightedLayout {
  dnnl::memory::desc src, weights, bias, dst;  // bias: zero when the layer has none
  // Non-empty: src and dst are one group's channels of tensors of these dims (a grouped
  // convolution run group by group), at the first group's place; the caller moves the pointers.
  dnnl::memory::dims src_whole, dst_whole;
  bool has_bias() const { return bias.get_size() > 0; }
  // The layouts of the caller's tensors: x / y channel-blocked by `src_block` / `dst_block` (> 0)
  // instead of plain, and one group's view of the whole tensors where there are groups.
  DnnlWeightedLayout User(int src_block, int dst_block) const;
};
class DnnlDirectForward;
// y = op(x, w) (+ bias); with `read_y`, the primitive also reads y (a sum post-op). With
// `direct`, its Prepare is given the call's operands under `direct_key`.
void DnnlWeightedForward(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd,
                         const DnnlWeightedLayout& layout, const float* x, const float* w,
                         const float* bias, float* y, Workspace* ws, bool read_y = false,
                         DnnlDirectForward* direct = nullptr, uint64_t direct_key = 0);
// The two steps (weights first, for those of `args` that are asked for) on `layout`.
std::vector<DnnlStep> DnnlWeightedBackwardSteps(const dnnl::primitive& data,
                                                const dnnl::primitive_desc_base& data_pd,
                                                const dnnl::primitive& weights,
                                                const dnnl::primitive_desc_base& weights_pd,
                                                const DnnlWeightedLayout& layout,
                                                const DnnlBackwardArgs& args);

// Weights reordered into the layout a primitive wants, kept between calls while they come from
// the same buffer at the same SyncedMemory::generation().
class DnnlWeightCache {
 public:
  // `w` (layout `user`) in layout `want`: reordered again when the source, its generation or the
  // layout changed since the last call.
  const float* Get(const dnnl::memory::desc& user, const dnnl::memory::desc& want, const float* w,
                   uint64_t generation);

 private:
  HostFloats data_;  // (huge pages from 1 MB: the weights are read again in every pass)
  size_t bytes_ = 0;
  const float* source_ = nullptr;
  uint64_t generation_ = 0;
  dnnl::memory::desc want_;
};

// A forward call whose operands already have the layouts its primitive wants (no reorder, no
// output through scratch: a layer in an inference net's channel-blocked chain, its weights kept
// reordered), set up once: later calls with the same primitive and key only point the kept
// oneDNN memory objects at their buffers. Setting up each call (descriptors built, compared and
// copied, memory objects and the argument map made and freed) cost about 15 us a layer, 5-7% of
// MobileNet v1's pass at batch 1 (one thread, a 2-core Xeon).
class DnnlDirectForward {
 public:
  // Whether Run may serve a call through `primitive` with this key.
  bool Matches(const dnnl::primitive& primitive, uint64_t key) const {
    return primitive_ && primitive_.get() == primitive.get() && key_ == key;
  }
  // Sets up for these operands (in DnnlWeightedForward's order: src, weights, dst, then bias)
  // when none needs a reorder or scratch; otherwise forgets any earlier set-up.
  void Prepare(const dnnl::primitive& primitive, uint64_t key, const dnnl::memory::desc& scratchpad,
               const std::vector<DnnlOperand>& operands);
  // The call of a matching key: y = op(x, w) (+ bias).
  void Run(const dnnl::primitive& primitive, const float* x, const float* w, const float* bias,
           float* y, Workspace* ws);

 private:
  // Held, so that a primitive made later (a Reshape's) never takes its address.
  dnnl::primitive primitive_;
  uint64_t key_ = 0;
  size_t scratchpad_bytes_ = 0;
  dnnl::memory scratchpad_, src_, weights_, bias_, dst_;  // bias_ empty without a bias
  std::vector<dnnl_exec_arg_t> args_;                     // the memories above, for the C call
};

// The primitives of a layer with weights (Fwd, BwdData, BwdWeights: e.g. convolution_forward,
// convolution_backward_data, convolution_backward_weights) over its plain layouts, and its three
// passes. The layer's engine creates the forward ones and says how to create the backward ones,
// which the first backward pass does (an inference net never needs them).
template <typename Fwd, typename BwdData, typename BwdWeights>
struct DnnlWeightedPrimitives : DnnlWeightedLayout {
  virtual ~DnnlWeightedPrimitives() = default;
  virtual void CreateBackward() = 0;  // sets the bwd_* members

  // How a forward pass reads and writes: with `weights_generation` (the weights blob's
  // data_generation(); 0: none) the weights in the forward primitive's layout are kept for the
  // next calls (forward-only layers, whose weights change rarely; training changes them every
  // iteration, so the copy would only cost memory); `src_block`/`dst_block` > 0: x / y are
  // channel-blocked by that (DnnlChannelBlocked) instead of plain.
  struct ForwardIo {
    uint64_t weights_generation = 0;
    int src_block = 0, dst_block = 0;
    bool read_dst = false;  // the primitive reads y too (a sum post-op)
  };
  void Forward(const float* x, const float* w, const float* bias, float* y, Workspace* ws,
               const ForwardIo& io = {}) {
    ForwardWith(fwd, fwd_pd, x, w, bias, y, ws, io);
  }
  // The same through another forward primitive of the same tensors (e.g. one with post-ops).
  void ForwardWith(const Fwd& primitive, const typename Fwd::primitive_desc& pd, const float* x,
                   const float* w, const float* bias, float* y, Workspace* ws,
                   const ForwardIo& io) {
    CREMA_ASSERT(supported, "oneDNN forward before a successful Prepare");
    // What decides the operands' layouts besides the primitive (which fixes pd).
    const uint64_t key =
        static_cast<uint64_t>(io.src_block) | static_cast<uint64_t>(io.dst_block) << 8 |
        static_cast<uint64_t>(io.weights_generation != 0) << 16 |
        static_cast<uint64_t>(io.read_dst) << 17 | static_cast<uint64_t>(bias != nullptr) << 18;
    if (direct.Matches(primitive, key)) {
      if (direct_weights_kept)
        w = weight_cache.Get(weights, pd.weights_desc(), w, io.weights_generation);
      direct.Run(primitive, x, w, bias, y, ws);
      return;
    }
    DnnlWeightedLayout layout = User(io.src_block, io.dst_block);
    direct_weights_kept = io.weights_generation != 0 && pd.weights_desc() != weights;
    if (direct_weights_kept) {
      layout.weights = pd.weights_desc();
      w = weight_cache.Get(weights, layout.weights, w, io.weights_generation);
    }
    DnnlWeightedForward(primitive, pd, layout, x, w, bias, y, ws, io.read_dst, &direct, key);
  }
  // The backward passes (DnnlBackwardArgs), in one DnnlExecute: a dy both read in a layout of
  // their own is reordered once.
  void Backward(const DnnlBackwardArgs& args, Workspace* ws) {
    CREMA_ASSERT(supported, "oneDNN backward before a successful Prepare");
    if (args.dw == nullptr && args.db == nullptr && args.dx == nullptr) return;
    if (!backward_ready) CreateBackward();
    backward_ready = true;
    DnnlExecute(DnnlWeightedBackwardSteps(bwd_data, bwd_data_pd, bwd_weights, bwd_weights_pd,
                                          User(args.src_block, args.dst_block), args),
                ws);
  }

  bool prepared = false, supported = false, backward_ready = false;
  DnnlWeightCache weight_cache;
  DnnlDirectForward direct;
  bool direct_weights_kept = false;  // the direct call's weights come from weight_cache
  typename Fwd::primitive_desc fwd_pd;
  Fwd fwd;
  typename BwdData::primitive_desc bwd_data_pd;
  BwdData bwd_data;
  typename BwdWeights::primitive_desc bwd_weights_pd;
  BwdWeights bwd_weights;
};

}  // namespace crema
#endif  // CREMA_WITH_DNNL
