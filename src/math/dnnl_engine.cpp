#include "math/dnnl_engine.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <unordered_map>

#include "core/cuda_context.hpp"
#include "core/workspace.hpp"
#include "crema/error.hpp"
#include "math/cpu_isa.hpp"

namespace crema {
namespace {

// -1: not set yet (read CREMA_CPU_ENGINE on first use).
std::atomic<int> g_cpu_engine{-1};

}  // namespace

CpuEngine ParseCpuEngine(const std::string& text, const std::string& what) {
  if (text == "auto") return CpuEngine::kAuto;
  if (text == "caffe") return CpuEngine::kCaffe;
  if (text == "dnnl") return CpuEngine::kDnnl;
  CREMA_THROW_CONFIG(what, " must be auto, caffe or dnnl, got \"", text, "\"");
}

const char* CpuEngineName(CpuEngine engine) {
  switch (engine) {
    case CpuEngine::kCaffe:
      return "caffe";
    case CpuEngine::kDnnl:
      return "dnnl";
    case CpuEngine::kAuto:
      break;
  }
  return "auto";
}

CpuEngine GetCpuEngine() {
  int value = g_cpu_engine.load();
  if (value < 0) {
    const char* env = std::getenv("CREMA_CPU_ENGINE");
    const CpuEngine engine =
        env == nullptr || *env == '\0' ? CpuEngine::kAuto : ParseCpuEngine(env, "CREMA_CPU_ENGINE");
    value = static_cast<int>(engine);
    g_cpu_engine.store(value);
  }
  return static_cast<CpuEngine>(value);
}

void SetCpuEngine(CpuEngine engine) { g_cpu_engine.store(static_cast<int>(engine)); }

bool DnnlBuilt() {
#ifdef CREMA_WITH_DNNL
  return true;
#else
  return false;
#endif
}

bool DnnlSgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
               int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#ifdef CREMA_WITH_DNNL
  if (m <= 0 || n <= 0 || k <= 0) return false;
  return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta,
                    c, ldc) == dnnl_success;
#else
  return false;
#endif
}

CpuEngine LayerCpuEngine() {
  // Deterministic mode promises results independent of timing and of the thread count: auto's
  // choice depends on timing, oneDNN's reductions on the threads.
  if (!DnnlBuilt() || gpu::Deterministic()) return CpuEngine::kCaffe;
  return GetCpuEngine();
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

const char* CpuKernelName(CpuKernel kernel) {
  switch (kernel) {
    case CpuKernel::kDnnl:
      return "oneDNN";
    case CpuKernel::kDnnlWinograd:
      return "oneDNN-Winograd";
    case CpuKernel::kCremaBlocked:
      return "crema-blocked";
    case CpuKernel::kCrema:
      break;
  }
  return "crema";
}

CpuEngineChoice::Race* CpuEngineChoice::Find(const char* direction,
                                             const std::vector<int>& shape) const {
  if (found_ != nullptr && found_shape_ == shape && found_direction_ == direction) return found_;
  const auto it = races_.find({direction, shape});
  if (it == races_.end()) return nullptr;
  found_ = const_cast<Race*>(&it->second);
  found_direction_ = direction;
  found_shape_ = shape;
  return found_;
}

CpuEngineChoice::Race& CpuEngineChoice::Get(const char* direction, const std::vector<int>& shape) {
  if (Race* race = Find(direction, shape)) return *race;
  races_[{direction, shape}];
  return *Find(direction, shape);
}

void CpuEngineChoice::Run(CpuEngine policy, const std::string& layer, const char* direction,
                          const std::vector<int>& shape, Pass crema, Pass dnnl, Pass winograd,
                          Pass blocked) {
  const auto run = [&](CpuKernel kernel) {
    if ((kernel == CpuKernel::kDnnlWinograd && !winograd) ||
        (kernel == CpuKernel::kCremaBlocked && !blocked))
      kernel = CpuKernel::kDnnl;
    last_ = CpuKernelName(kernel);
    (kernel == CpuKernel::kCrema          ? crema
     : kernel == CpuKernel::kDnnl         ? dnnl
     : kernel == CpuKernel::kDnnlWinograd ? winograd
                                          : blocked)();
  };
  if (policy != CpuEngine::kAuto)
    return run(policy == CpuEngine::kDnnl ? CpuKernel::kDnnl : CpuKernel::kCrema);
  Race& race = Get(direction, shape);
  if (race.decided) return run(race.kernel);
  if (race.count == 0) {
    if (crema_races_) race.kernels[race.count++] = CpuKernel::kCrema;
    race.kernels[race.count++] = CpuKernel::kDnnl;
    if (winograd) race.kernels[race.count++] = CpuKernel::kDnnlWinograd;
    if (blocked) race.kernels[race.count++] = CpuKernel::kCremaBlocked;
    if (race.count == 1) {  // oneDNN's kernel alone: nothing to race
      race.decided = true;
      race.kernel = CpuKernel::kDnnl;
      return run(race.kernel);
    }
  }
  const int k = race.pass % race.count;
  const auto start = std::chrono::steady_clock::now();
  run(race.kernels[k]);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (race.pass >= race.count)  // each kernel's first pass warms up
    race.best[k] = race.pass < 2 * race.count ? seconds : std::min(race.best[k], seconds);
  ++race.pass;
  if (race.pass < 2 * race.count) return;
  int fastest = 0;
  for (int i = 1; i < race.count; ++i)
    if (race.best[i] < race.best[fastest]) fastest = i;
  // A clear winner after one timed pass each ends the race early; a close one runs it out.
  bool clear = race.pass == 2 * race.count;
  for (int i = 0; i < race.count; ++i)
    clear = clear && (i == fastest || race.best[i] > kClearMargin * race.best[fastest]);
  if (race.pass < kPassesPerKernel * race.count && !clear) return;
  race.decided = true;
  race.kernel = race.kernels[fastest];
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << layer << " " << direction << " " << ShapeText(shape)
       << ": CPU engine " << CpuKernelName(race.kernel) << " (";
  for (int i = 0; i < race.count; ++i)
    line << (i ? ", " : "") << CpuKernelName(race.kernels[i]) << " " << race.best[i] * 1e3 << " ms";
  LOG(INFO) << line.str() << ")";
}

bool CpuEngineChoice::Racing(const char* direction, const std::vector<int>& shape) const {
  const Race* race = Find(direction, shape);
  return race != nullptr && !race->decided;
}

bool CpuEngineChoice::Decided(const char* direction, const std::vector<int>& shape,
                              CpuKernel* kernel) const {
  const Race* race = Find(direction, shape);
  if (race == nullptr || !race->decided) return false;
  if (kernel != nullptr) *kernel = race->kernel;
  return true;
}

bool CpuEngineChoice::NextRunsDnnl(CpuEngine policy, const char* direction,
                                   const std::vector<int>& shape) const {
  if (policy != CpuEngine::kAuto) return policy == CpuEngine::kDnnl;
  const Race* race = Find(direction, shape);
  // A race's first pass runs crema's kernel, where it races.
  if (race == nullptr) return !crema_races_;
  return race->decided ? race->kernel != CpuKernel::kCrema
                       : race->kernels[race->pass % race->count] != CpuKernel::kCrema;
}

std::vector<CpuEngineChoice::Decision> CpuEngineChoice::Decisions() const {
  std::vector<Decision> decisions;
  for (const auto& [key, race] : races_)
    if (race.decided) decisions.push_back({key.first, key.second, race.kernel});
  return decisions;
}

void CpuEngineChoice::Restore(const Decision& decision) {
  Race& race = Get(decision.direction.c_str(), decision.shape);
  race.decided = true;
  race.kernel = decision.kernel;
}

int ChannelBlock() {
  if (!DnnlBuilt()) return 0;
  switch (CpuIsaLevel()) {
    case CpuIsa::kAvx512:
      return 16;
    case CpuIsa::kAvx2Fma:
      return 8;
    case CpuIsa::kBaseline:
      break;
  }
  return 0;
}

bool ChannelBlockable(const std::vector<int>& shape) {
  const int block = ChannelBlock();
  return block > 0 && shape.size() == 4 && shape[1] % block == 0 &&
         static_cast<int64_t>(shape[2]) * shape[3] > 1;
}

#ifdef CREMA_WITH_DNNL

dnnl::engine& DnnlEngine() {
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// One per thread: nets running in different threads (the API allows it) never share a stream.
dnnl::stream& DnnlStream() {
  thread_local dnnl::stream stream(DnnlEngine());
  return stream;
}

dnnl::primitive_attr DnnlUserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

using dnnl::memory;

memory::format_tag PlainTag(size_t rank) {
  switch (rank) {
    case 1:
      return memory::format_tag::a;
    case 2:
      return memory::format_tag::ab;
    case 3:
      return memory::format_tag::abc;
    case 4:
      return memory::format_tag::abcd;
    case 5:
      return memory::format_tag::abcde;
    default:
      return memory::format_tag::abcdef;
  }
}

}  // namespace

memory::desc DnnlPlain(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, PlainTag(dims.size()));
}

memory::desc DnnlAny(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

memory::desc DnnlChannelBlocked(const memory::dims& dims, int block) {
  CREMA_ASSERT(dims.size() == 4 && (block == 0 || block == 8 || block == 16), dims.size(), " ",
               block);
  if (block == 0) return DnnlPlain(dims);
  return memory::desc(dims, memory::data_type::f32,
                      block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

void ChannelBlockedToPlain(const std::vector<int>& shape, int block, float* data, Workspace* ws) {
  const memory::dims dims(shape.begin(), shape.end());
  const memory::desc plain = DnnlPlain(dims), blocked = DnnlChannelBlocked(dims, block);
  CREMA_ASSERT(plain.get_size() == blocked.get_size(), ShapeText(shape), " by ", block);
  float* scratch = static_cast<float*>(ws->Cpu(plain.get_size()));
  dnnl::engine& engine = DnnlEngine();
  memory from(blocked, engine, data), to(plain, engine, scratch);
  dnnl::reorder(from, to).execute(DnnlStream(), from, to);
  DnnlStream().wait();
  const int64_t n = static_cast<int64_t>(plain.get_size() / sizeof(float));
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) data[i] = scratch[i];
}

bool DnnlSameBytes(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  const memory::dims dims = a.dims();
  if (dims != b.dims() || dims.size() != 4 || dims[2] * dims[3] != 1) return false;
  const memory::desc plain = DnnlPlain(dims);
  for (const int block : {8, 16}) {
    if (dims[1] % block != 0) continue;
    const memory::desc blocked = DnnlChannelBlocked(dims, block);
    if ((a == plain && b == blocked) || (a == blocked && b == plain)) return true;
  }
  return false;
}

namespace {

// Whether `want` is oneDNN's 16 x 16 blocked layout of plain 4-D weights `user` (ABcd16b16a: O /
// 16, I / 16, h, w, then 16 inputs by 16 outputs), which the weight gradients of its convolutions
// come in. oneDNN's reorder of it to plain writes one output channel's value per step, 4 * I * h
// * w bytes apart: a 512 x 2048 1x1 gradient (ResNet-50's res5) took it 2.2-3.2 ms on a 2-core
// Xeon, 8x the time of TiledWeightsToPlain writing whole rows.
bool IsTiledWeights(const memory::desc& want, const memory::desc& user) {
  const memory::dims dims = user.dims();
  return dims.size() == 4 && dims[0] % 16 == 0 && dims[1] % 16 == 0 && user == DnnlPlain(dims) &&
         want == memory::desc(dims, memory::data_type::f32, memory::format_tag::ABcd16b16a);
}

// plain = tiled in the plain layout (IsTiledWeights), or plain += it with `add` (the same
// additions as a reorder into scratch and then +=).
void TiledWeightsToPlain(const memory::dims& dims, const float* tiled, float* plain, bool add) {
  const int64_t outputs = dims[0], inputs = dims[1], positions = dims[2] * dims[3];
  const int64_t input_blocks = inputs / 16;
#pragma omp parallel for if (outputs * inputs * positions > 65536)
  for (int64_t o = 0; o < outputs; ++o) {
    // Row o of the plain weights, in order: input i, then position k.
    float* row = plain + o * inputs * positions;
    const float* block = tiled + (o / 16) * input_blocks * positions * 256 + o % 16;
    for (int64_t ib = 0; ib < input_blocks; ++ib)
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t k = 0; k < positions; ++k) {
          const float value = block[(ib * positions + k) * 256 + i * 16];
          float& out = row[(ib * 16 + i) * positions + k];
          out = add ? out + value : value;
        }
  }
}

}  // namespace

void DnnlExecute(const std::vector<DnnlStep>& steps, Workspace* ws) {
  const auto rounded = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  // Where each operand's reorder buffer (piece) and plain scratch copy (plain) lie in the block,
  // and the earlier step whose reorder of the same input it reads (-1: its own).
  struct Place {
    size_t piece = SIZE_MAX, plain = SIZE_MAX;
    int shared_from = -1;
    bool tiled = false;  // an output put back to plain by TiledWeightsToPlain
  };
  std::vector<std::vector<Place>> places(steps.size());
  const auto same_input = [](const DnnlOperand& a, const DnnlOperand& b) {
    return !a.output && !b.output && a.data == b.data && a.user == b.user && a.want == b.want;
  };
  // Inputs reordered for several steps first, kept through them all; then each step's own
  // buffers, from the same offset for every step (steps run one at a time).
  size_t shared = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    places[s].resize(steps[s].operands.size());
    for (size_t i = 0; i < steps[s].operands.size(); ++i) {
      const DnnlOperand& op = steps[s].operands[i];
      if (op.output || DnnlSameBytes(op.want, op.user)) continue;
      for (size_t e = 0; e < s && places[s][i].shared_from < 0; ++e)
        for (size_t j = 0; j < steps[e].operands.size(); ++j)
          if (same_input(steps[e].operands[j], op)) {
            Place& first = places[e][j];
            if (first.piece == SIZE_MAX) {
              first.piece = shared;
              shared += rounded(op.want.get_size());
            }
            places[s][i] = {first.piece, SIZE_MAX, static_cast<int>(e)};
            break;
          }
    }
  }
  size_t total = shared;
  std::vector<size_t> pad(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    size_t end = shared;
    pad[s] = end;
    end += rounded(steps[s].scratchpad.get_size());
    for (size_t i = 0; i < steps[s].operands.size(); ++i) {
      const DnnlOperand& op = steps[s].operands[i];
      Place& place = places[s][i];
      if (place.piece == SIZE_MAX && !DnnlSameBytes(op.want, op.user)) {
        place.piece = end;
        end += rounded(op.want.get_size());
      }
      place.tiled = op.output && place.piece != SIZE_MAX && IsTiledWeights(op.want, op.user);
      // Accumulated outputs, and outputs the caller does not want, land in plain scratch first
      // (tiled weights are added straight from their piece, or dropped).
      if ((op.accumulate || op.data == nullptr) && !place.tiled) {
        place.plain = end;
        end += rounded(op.user.get_size());
      }
    }
    total = std::max(total, end);
  }
  char* base = static_cast<char*>(ws->Cpu(total));
  dnnl::engine& engine = DnnlEngine();
  dnnl::stream& stream = DnnlStream();
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::vector<DnnlOperand>& operands = steps[s].operands;
    std::unordered_map<int, memory> args;
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(steps[s].scratchpad, engine, base + pad[s]));
    std::vector<memory> users(operands.size()), wanted(operands.size());
    for (size_t i = 0; i < operands.size(); ++i) {
      const DnnlOperand& op = operands[i];
      const Place& place = places[s][i];
      users[i] = memory(op.user, engine, place.plain != SIZE_MAX ? base + place.plain : op.data);
      wanted[i] = place.piece != SIZE_MAX ? memory(op.want, engine, base + place.piece)
                  : op.want == op.user    ? users[i]
                                          : memory(op.want, engine, users[i].get_data_handle());
      if ((!op.output || op.read_too) && place.piece != SIZE_MAX && place.shared_from < 0)
        dnnl::reorder(users[i], wanted[i]).execute(stream, users[i], wanted[i]);
      args.emplace(op.arg, wanted[i]);
    }
    steps[s].primitive->execute(stream, args);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].output && places[s][i].piece != SIZE_MAX && !places[s][i].tiled)
        dnnl::reorder(wanted[i], users[i]).execute(stream, wanted[i], users[i]);
    }
    stream.wait();
    for (size_t i = 0; i < operands.size(); ++i) {
      const DnnlOperand& op = operands[i];
      if (places[s][i].tiled && op.data != nullptr)
        TiledWeightsToPlain(op.user.dims(), static_cast<const float*>(wanted[i].get_data_handle()),
                            static_cast<float*>(op.data), op.accumulate);
      if (!op.accumulate || op.data == nullptr || places[s][i].tiled) continue;
      const float* sum = reinterpret_cast<const float*>(base + places[s][i].plain);
      float* out = static_cast<float*>(op.data);
      const int64_t n = static_cast<int64_t>(op.user.get_size() / sizeof(float));
#pragma omp parallel for if (n > 65536)
      for (int64_t j = 0; j < n; ++j) out[j] += sum[j];
    }
  }
}

void DnnlExecute(const dnnl::primitive& primitive, const memory::desc& scratchpad,
                 const std::vector<DnnlOperand>& operands, Workspace* ws) {
  DnnlExecute({{&primitive, scratchpad, operands}}, ws);
}

const float* DnnlWeightCache::Get(const memory::desc& user, const memory::desc& want,
                                  const float* w, uint64_t generation) {
  if (data_ && source_ == w && generation_ == generation && want_ == want) return data_.get();
  const size_t bytes = want.get_size();
  if (bytes > bytes_ || !data_) {
    data_.reset(static_cast<float*>(AllocateHost(bytes, kWeightHugePagesFrom)));
    bytes_ = bytes;
  }
  dnnl::engine& engine = DnnlEngine();
  memory from(user, engine, const_cast<float*>(w)), to(want, engine, data_.get());
  dnnl::reorder(from, to).execute(DnnlStream(), from, to);
  DnnlStream().wait();
  source_ = w;
  generation_ = generation;
  want_ = want;
  return data_.get();
}

void DnnlWeightedForward(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd,
                         const DnnlWeightedLayout& layout, const float* x, const float* w,
                         const float* bias, float* y, Workspace* ws, bool read_y,
                         DnnlDirectForward* direct, uint64_t direct_key) {
  std::vector<DnnlOperand> ops = {
      {DNNL_ARG_SRC, layout.src, pd.src_desc(0), const_cast<float*>(x)},
      {DNNL_ARG_WEIGHTS, layout.weights, pd.weights_desc(0), const_cast<float*>(w)},
      {DNNL_ARG_DST, layout.dst, pd.dst_desc(0), y, true, false, read_y}};
  if (layout.has_bias())
    ops.push_back({DNNL_ARG_BIAS, layout.bias, pd.weights_desc(1), const_cast<float*>(bias)});
  DnnlExecute(primitive, pd.scratchpad_desc(), ops, ws);
  if (direct != nullptr) direct->Prepare(primitive, direct_key, pd.scratchpad_desc(), ops);
}

void DnnlDirectForward::Prepare(const dnnl::primitive& primitive, uint64_t key,
                                const memory::desc& scratchpad,
                                const std::vector<DnnlOperand>& operands) {
  primitive_ = dnnl::primitive();
  args_.clear();
  for (const DnnlOperand& op : operands)
    if (!DnnlSameBytes(op.want, op.user) || op.accumulate || op.data == nullptr) return;
  CREMA_ASSERT(operands.size() >= 3 && operands[0].arg == DNNL_ARG_SRC &&
                   operands[1].arg == DNNL_ARG_WEIGHTS && operands[2].arg == DNNL_ARG_DST &&
                   (operands.size() == 3 || operands[3].arg == DNNL_ARG_BIAS),
               "DnnlDirectForward: operands out of order");
  dnnl::engine& engine = DnnlEngine();
  // Placeholder handles until Run points them at its buffers (never null, which would make
  // oneDNN allocate).
  void* unset = operands[0].data;
  scratchpad_bytes_ = scratchpad.get_size();
  scratchpad_ = memory(scratchpad, engine, unset);
  src_ = memory(operands[0].want, engine, unset);
  weights_ = memory(operands[1].want, engine, unset);
  dst_ = memory(operands[2].want, engine, unset);
  args_ = {{DNNL_ARG_SCRATCHPAD, scratchpad_.get()},
           {DNNL_ARG_SRC, src_.get()},
           {DNNL_ARG_WEIGHTS, weights_.get()},
           {DNNL_ARG_DST, dst_.get()}};
  bias_ = memory();
  if (operands.size() == 4) {
    bias_ = memory(operands[3].want, engine, unset);
    args_.push_back({DNNL_ARG_BIAS, bias_.get()});
  }
  primitive_ = primitive;
  key_ = key;
}

void DnnlDirectForward::Run(const dnnl::primitive& primitive, const float* x, const float* w,
                            const float* bias, float* y, Workspace* ws) {
  CREMA_ASSERT(Matches(primitive, key_), "DnnlDirectForward::Run without a matching Prepare");
  if (scratchpad_bytes_ > 0) scratchpad_.set_data_handle(ws->Cpu(scratchpad_bytes_));
  src_.set_data_handle(const_cast<float*>(x));
  weights_.set_data_handle(const_cast<float*>(w));
  dst_.set_data_handle(y);
  if (bias_) bias_.set_data_handle(const_cast<float*>(bias));
  dnnl::stream& stream = DnnlStream();
  // oneDNN's C call on the kept arguments: the C++ execute builds a vector of them every time.
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), stream.get(),
                                                 static_cast<int>(args_.size()), args_.data()),
                          "could not execute a primitive");
  stream.wait();
}

namespace {
// `part` as the caller holds it: in a tensor of `whole` dims (none: `part` is the whole tensor),
// channel-blocked by `block` (0: plain).
memory::desc UserView(const memory::desc& part, const memory::dims& whole, int block) {
  if (whole.empty()) return block > 0 ? DnnlChannelBlocked(part.dims(), block) : part;
  return DnnlChannelBlocked(whole, block)
      .submemory_desc(part.dims(), memory::dims(part.dims().size(), 0));
}
}  // namespace

DnnlWeightedLayout DnnlWeightedLayout::User(int src_block, int dst_block) const {
  DnnlWeightedLayout layout = *this;
  layout.src = UserView(src, src_whole, src_block);
  layout.dst = UserView(dst, dst_whole, dst_block);
  return layout;
}

std::vector<DnnlStep> DnnlWeightedBackwardSteps(const dnnl::primitive& data,
                                                const dnnl::primitive_desc_base& data_pd,
                                                const dnnl::primitive& weights,
                                                const dnnl::primitive_desc_base& weights_pd,
                                                const DnnlWeightedLayout& layout,
                                                const DnnlBackwardArgs& args) {
  std::vector<DnnlStep> steps;
  float* dy = const_cast<float*>(args.dy);
  if (args.dw != nullptr || args.db != nullptr) {
    // oneDNN computes both diffs at once; one not asked for lands in scratch and is dropped.
    std::vector<DnnlOperand> ops = {
        {DNNL_ARG_SRC, layout.src, weights_pd.src_desc(0), const_cast<float*>(args.x)},
        {DNNL_ARG_DIFF_DST, layout.dst, weights_pd.diff_dst_desc(0), dy},
        {DNNL_ARG_DIFF_WEIGHTS, layout.weights, weights_pd.diff_weights_desc(0), args.dw, true,
         args.dw != nullptr && !args.overwrite_dw}};
    if (layout.has_bias())
      ops.push_back({DNNL_ARG_DIFF_BIAS, layout.bias, weights_pd.diff_weights_desc(1), args.db,
                     true, args.db != nullptr && !args.overwrite_db});
    steps.push_back({&weights, weights_pd.scratchpad_desc(), std::move(ops)});
  }
  if (args.dx != nullptr)
    steps.push_back(
        {&data,
         data_pd.scratchpad_desc(),
         {{DNNL_ARG_DIFF_DST, layout.dst, data_pd.diff_dst_desc(0), dy},
          {DNNL_ARG_WEIGHTS, layout.weights, data_pd.weights_desc(0), const_cast<float*>(args.w)},
          {DNNL_ARG_DIFF_SRC, layout.src, data_pd.diff_src_desc(0), args.dx, true}}});
  return steps;
}

#else  // without oneDNN nothing is ever blocked (ChannelBlock() is 0)

void ChannelBlockedToPlain(const std::vector<int>&, int, float*, Workspace*) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}

#endif  // CREMA_WITH_DNNL

}  // namespace crema
