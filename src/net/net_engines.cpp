// Net::PrepareCpuEngines: the CPU engine races run before training on scratch blobs, so that the
// engines in use from the first iteration on are decided once (and kept by a .solverstate). The
// decisions are also kept per machine in a small file (the choice cache): every later process
// that trains or times the same layer on the same shapes, threads and CPU runs the same engines,
// so two runs of one solver (one of them resumed, or not) compute the same bits.
#include <glog/logging.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "crema/net.hpp"
#include "crema/version.hpp"
#include "math/blas_setup.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {
namespace {

// The most bytes a race writes through the caches before each pass (Net::PrepareCpuEngines):
// with 128 MB the race's times matched the net's passes on a 2-core Xeon whose caches hold more
// than 32 MB (with 32 they fell short).
constexpr size_t kMaxRaceCacheBytes = size_t{128} << 20;

namespace fs = std::filesystem;

// The choice cache: CREMA_CPU_ENGINE_CACHE names the file ("off" or empty: none); by default
// $XDG_CACHE_HOME/crema/cpu_engines.tsv, else ~/.cache/crema/cpu_engines.tsv.
fs::path ChoiceCacheFile() {
  if (const char* env = std::getenv("CREMA_CPU_ENGINE_CACHE"); env != nullptr)
    return std::string(env) == "off" ? fs::path() : fs::path(env);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return fs::path(xdg) / "crema" / "cpu_engines.tsv";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return fs::path(home) / ".cache" / "crema" / "cpu_engines.tsv";
  return {};
}

// key -> kernel; one "key<TAB>kernel" per line (CpuKernelName), others ignored.
using ChoiceCache = std::map<std::string, CpuKernel>;

bool ParseKernel(const std::string& name, CpuKernel* kernel) {
  for (const CpuKernel k :
       {CpuKernel::kCrema, CpuKernel::kDnnl, CpuKernel::kDnnlWinograd, CpuKernel::kCremaBlocked})
    if (name == CpuKernelName(k)) {
      *kernel = k;
      return true;
    }
  return false;
}

ChoiceCache ReadChoiceCache(const fs::path& file) {
  ChoiceCache cache;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.rfind('\t');
    if (tab == std::string::npos || tab == 0) continue;
    if (CpuKernel kernel; ParseKernel(line.substr(tab + 1), &kernel))
      cache[line.substr(0, tab)] = kernel;
  }
  return cache;
}

// Adds `decided` to the file (merged with what other processes wrote meanwhile), replacing it
// atomically. A cache that cannot be written costs only the races of later runs: a warning.
void WriteChoiceCache(const fs::path& file, const ChoiceCache& decided) {
  ChoiceCache cache = ReadChoiceCache(file);
  // Decisions about another commit's kernels are of no use to this one.
  const std::string commit = StrCat(" ", GitCommit(), " ");
  for (auto it = cache.begin(); it != cache.end();)
    it = it->first.find(commit) == std::string::npos ? cache.erase(it) : std::next(it);
  for (const auto& [key, kernel] : decided) cache[key] = kernel;
  std::error_code error;
  fs::create_directories(file.parent_path(), error);
  const fs::path temp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temp);
    for (const auto& [key, kernel] : cache) out << key << '\t' << CpuKernelName(kernel) << '\n';
    if (!out.good()) error = std::make_error_code(std::errc::io_error);
  }
  if (!error) fs::rename(temp, file, error);
  if (error) {
    fs::remove(temp, error);
    LOG(WARNING) << "could not write the CPU engine choice cache " << file.string()
                 << " (CREMA_CPU_ENGINE_CACHE=off turns it off)";
  }
}

// FNV-1a, 64 bits: a hash of the layer's configuration that stays the same from run to run.
uint64_t Fnv1a(const std::string& bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

// The CPU's model name (/proc/cpuinfo), with its spaces replaced: the timings hold for it only.
const std::string& CpuModel() {
  static const std::string model = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0) {
        std::string name = line.substr(line.find(':') + 1);
        name.erase(0, name.find_first_not_of(' '));
        for (char& c : name)
          if (c == ' ' || c == '\t') c = '_';
        return name;
      }
    return std::string("unknown_cpu");
  }();
  return model;
}

// What makes two layers' races equal: the type and configuration (not the name, the blobs'
// names or the learning multipliers), whether it runs forward only (oneDNN's convolutions then
// keep their weights reordered), the CPU, the threads and crema's commit (the kernels raced).
std::string LayerKey(const Layer& layer) {
  LayerParameter param = layer.layer_param();
  param.clear_name();
  param.clear_bottom();
  param.clear_top();
  param.clear_param();
  param.clear_blobs();
  param.clear_loss_weight();
  param.clear_propagate_down();
  param.clear_include();
  param.clear_exclude();
  param.clear_phase();
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(Fnv1a(param.SerializeAsString())));
  return StrCat(layer.type(), " ", hash, layer.forward_only() ? " inference " : " ", CpuModel(),
                " t", CpuThreads(), " ", GitCommit());
}

}  // namespace

void Net::PrepareCpuEngines() {
  if (!device_.is_cpu() || GetCpuEngine() != CpuEngine::kAuto || !DnnlBuilt()) return;
  // The folded convolutions (inference) are the layers that run: race those.
  if (fold_stale_) ApplyFold();
  const fs::path cache_file = ChoiceCacheFile();
  const ChoiceCache cache = cache_file.empty() ? ChoiceCache() : ReadChoiceCache(cache_file);
  ChoiceCache decided;  // by this call: a later layer of the same key and shape takes it too
  // Between two passes of a layer in the net, the other layers write their outputs through the
  // caches; a race pass right after the layer's own last one would find its weights, scratch and
  // output cached as they never are in the net (oneDNN's Winograd convolution on SqueezeNet
  // v1.1's fire2/expand3x3 at batch 8, one thread: 2.1-2.5 ms in such races against 2.4-2.7 for
  // its direct kernel, then 3.4 ms in the net's passes, where the direct one took 2.4). So before
  // each race pass a buffer as large as the net's blobs (what its layers write: data, and diffs
  // in training; at most kMaxRaceCacheBytes) gets a write to each of its cache lines. (The
  // buffer is memory while the races run, in a run whose choices are not cached yet: a training
  // net's peak comes later and is larger, an inference net's peak RSS grew by 35-55 MiB with it,
  // SqueezeNet, MobileNet and GoogLeNet in cpu_bench.sh.)
  size_t net_bytes = 0;
  for (const BlobPtr& blob : blobs_) net_bytes += blob->count() * SizeOf(blob->dtype());
  if (phase_ == TRAIN) net_bytes *= 2;  // the diffs too
  std::vector<char> lines;              // allocated when a race runs
  const auto write_through_caches = [&] {
    if (lines.empty()) lines.assign(std::min(net_bytes, kMaxRaceCacheBytes) + 1, 0);
    for (size_t i = 0; i < lines.size(); i += 64) ++lines[i];
  };
  int from_cache = 0, from_same = 0;
  for (int i = 0; i < num_layers(); ++i) {
    if (folded_into_[i] >= 0 || bottom_vecs_[i].empty()) continue;
    Layer* layer = forward_layer(i);
    CpuEngineChoice* choice = layer->cpu_engine_choice();
    if (choice == nullptr) continue;
    const std::vector<int> shape = bottom_vecs_[i][0]->shape();
    const bool backward =
        !layer->forward_only() && layer_need_backward_[i] && layer->CpuEngineRacesBackward();
    // The race runs the layer as the net's passes do, with the ReLU they fuse into it
    // (ForwardFromTo; oneDNN's kernels then run another primitive, with the ReLU as a post-op),
    // and keeps its decisions apart from those of the same layer without one.
    const int relu = fused_relu_of_[i];
    layer->set_fused_relu(
        relu >= 0, relu >= 0 ? layers_[relu]->layer_param().relu_param().negative_slope() : 0);
    // (A layer in a channel-blocked chain races oneDNN's kernels only: its decision is not that
    // of the same layer where crema's race too.)
    const std::string key =
        LayerKey(*layer) + (relu >= 0 ? " relu" : "") + (choice->crema_races() ? "" : " blocked");
    auto cache_key = [&](const std::string& direction) {
      return StrCat(key, " ", direction, " ", ShapeText(shape));
    };
    for (const char* direction : {"forward", "backward"}) {
      if (choice->Decided(direction, shape)) continue;
      if (const auto it = cache.find(cache_key(direction)); it != cache.end()) {
        choice->Restore({direction, shape, it->second});
        ++from_cache;
      } else if (const auto same = decided.find(cache_key(direction)); same != decided.end()) {
        // An identical layer on the same shape raced already (ResNet's repeated blocks): the
        // cache would give this one its decision in the next run anyway.
        choice->Restore({direction, shape, same->second});
        ++from_same;
      }
    }
    if (choice->Decided("forward", shape) && (!backward || choice->Decided("backward", shape)))
      continue;
    // Scratch inputs and outputs (zeros: the time does not depend on the values).
    std::vector<std::unique_ptr<Blob>> scratch;
    BlobVec bottom, top;
    // (Of the types the layer sees: float32 stand-ins of half-precision blobs under --amp.)
    for (size_t j = 0; j < bottom_vecs_[i].size(); ++j) {
      scratch.push_back(
          std::make_unique<Blob>(bottom_vecs_[i][j]->shape(), layer_bottoms_[i][j]->dtype()));
      bottom.push_back(scratch.back().get());
    }
    for (const Blob* t : layer_tops_[i]) {
      scratch.push_back(std::make_unique<Blob>(t->dtype()));
      scratch.back()->set_channel_block_allowed(t->channel_block_allowed());
      top.push_back(scratch.back().get());
    }
    // In the layouts the net will give the layer (net_layout.cpp): oneDNN's passes then read
    // channel-blocked inputs where the net's arrive so (no reorder), crema's plain ones.
    const auto set_layouts = [&] {
      for (size_t j = 0; j < bottom.size(); ++j) {
        const int id = bottom_id_vecs_[i][j];
        bottom[j]->data()->set_channel_block(id < static_cast<int>(channel_block_arrives_.size()) &&
                                                     channel_block_arrives_[id]
                                                 ? ChannelBlock()
                                                 : 0);
      }
      if (layer->channel_blocking() == Layer::ChannelBlocking::kEngine &&
          !layer->ReadsChannelBlocked(bottom, top))
        for (Blob* b : bottom) b->data()->set_channel_block(0);
    };
    // Backward: the top gradients in the layout of the values the Forward wrote (the next layers
    // write them so), or all plain where the pass reads plain ones.
    const auto set_backward_layouts = [&] {
      const bool blocked = layer->channel_blocking() == Layer::ChannelBlocking::kEngine &&
                           layer->BackwardReadsChannelBlocked(top, bottom);
      for (Blob* t : top)
        if (t->diff()) t->diff()->set_channel_block(blocked ? t->cpu_channel_block() : 0);
      if (!blocked)
        for (Blob* b : bottom) b->data()->set_channel_block(0);
    };
    // Backward accumulates into the parameter gradients: keep them aside.
    std::vector<std::unique_ptr<Blob>> diffs;
    if (backward)
      for (const BlobPtr& param : layer->blobs()) {
        diffs.push_back(std::make_unique<Blob>(param->shape(), param->dtype()));
        diffs.back()->CopyFrom(*param, true);
      }
    for (int pass = 0; pass < CpuEngineChoice::kMaxRacePasses; ++pass) {
      // (Not before the first pass, untimed in every race: a race of one kernel, oneDNN's
      // alone where the layer's input arrives channel-blocked, ends there.)
      if (pass > 0) write_through_caches();
      set_layouts();
      layer->Forward(bottom, top);
      if (backward) {
        // As in an iteration: the gradients cleared (lazily) before the layer writes them.
        for (const BlobPtr& param : layer->blobs()) param->SetDiffZeroLazily();
        set_backward_layouts();
        layer->Backward(top, bottom_need_backward_[i], bottom);
      }
      if (!choice->Racing("forward", shape) && !(backward && choice->Racing("backward", shape)))
        break;
    }
    for (size_t j = 0; j < diffs.size(); ++j) layer->blobs()[j]->CopyFrom(*diffs[j], true);
    for (const CpuEngineChoice::Decision& d : choice->Decisions())
      if (d.shape == shape) decided[cache_key(d.direction)] = d.kernel;
  }
  if (from_cache > 0)
    LOG(INFO) << "net \"" << name_ << "\": " << from_cache << " CPU engine choices from "
              << cache_file.string();
  if (from_same > 0)
    LOG(INFO) << "net \"" << name_ << "\": " << from_same
              << " CPU engine choices taken from identical layers on the same shapes";
  if (!cache_file.empty() && !decided.empty()) WriteChoiceCache(cache_file, decided);
}

}  // namespace crema
