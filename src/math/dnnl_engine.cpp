#include "math/dnnl_engine.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"

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

CpuEngine LayerCpuEngine(bool force_caffe) {
  // Deterministic mode promises results independent of timing and of the thread count: auto's
  // choice depends on timing, oneDNN's reductions on the threads.
  if (force_caffe || !DnnlBuilt() || gpu::Deterministic()) return CpuEngine::kCaffe;
  return GetCpuEngine();
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

void CpuEngineChoice::Run(CpuEngine policy, const std::string& layer, const char* direction,
                          const std::vector<int>& shape, const std::function<void()>& crema,
                          const std::function<void()>& dnnl) {
  if (policy != CpuEngine::kAuto) {
    const bool use_dnnl = policy == CpuEngine::kDnnl;
    last_ = use_dnnl ? "oneDNN" : "crema";
    (use_dnnl ? dnnl : crema)();
    return;
  }
  Race& race = races_[{direction, shape}];
  if (race.decided) {
    last_ = race.use_dnnl ? "oneDNN" : "crema";
    (race.use_dnnl ? dnnl : crema)();
    return;
  }
  const bool use_dnnl = race.pass % 2 == 1;
  last_ = use_dnnl ? "oneDNN" : "crema";
  const auto start = std::chrono::steady_clock::now();
  (use_dnnl ? dnnl : crema)();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (race.pass >= 2) {  // passes 0 and 1 warm up
    double& best = use_dnnl ? race.dnnl_best : race.crema_best;
    best = race.pass < 4 ? seconds : std::min(best, seconds);
  }
  if (++race.pass < kRacePasses) return;
  race.decided = true;
  race.use_dnnl = race.dnnl_best < race.crema_best;
  std::ostringstream line;
  line << std::fixed << std::setprecision(3) << layer << " " << direction << " " << ShapeText(shape)
       << ": CPU engine " << (race.use_dnnl ? "oneDNN" : "crema") << " (oneDNN "
       << race.dnnl_best * 1e3 << " ms, crema " << race.crema_best * 1e3 << " ms)";
  LOG(INFO) << line.str();
}

#ifdef CREMA_WITH_DNNL

dnnl::engine& DnnlEngine() {
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& DnnlStream() {
  static auto* stream = new dnnl::stream(DnnlEngine());
  return *stream;
}

dnnl::primitive_attr DnnlUserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

int DnnlScratch::Add(size_t bytes) {
  offsets_.push_back(total_);
  total_ += (bytes + 63) / 64 * 64;
  return static_cast<int>(offsets_.size()) - 1;
}

#endif  // CREMA_WITH_DNNL

}  // namespace crema
