#include "flags.hpp"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#include "math/dnnl_engine.hpp"

DEFINE_string(solver, "", "The solver definition protocol buffer text file.");
DEFINE_string(model, "", "The model definition protocol buffer text file.");
DEFINE_string(weights, "",
              "Pretrained weights to initialise the net from: one or more .caffemodel (or "
              ".caffemodel.h5) files separated by commas. Cannot be used with --snapshot.");
DEFINE_string(snapshot, "",
              "A .solverstate to resume training from; \"auto\" (train): the newest one for "
              "the solver's snapshot_prefix, as --resume.");
DEFINE_string(gpu, "",
              "Run on GPU: a device id, e.g. --gpu 0, or 'all'. Empty (the default) runs on "
              "the CPU. train: a list (--gpu 0,1) or 'all' trains on several GPUs, one process "
              "each, batch_size per GPU (docs/distributed.md).");
DEFINE_string(math, "fp32",
              "GPU float32 math: fp32 (exact, the default) or tf32 (cuBLAS and cuDNN may use "
              "TF32 tensor cores: faster, about 3 fewer significant digits in products).");
DEFINE_int32(cudnn_workspace_mb, 1024,
             "Upper bound of the cuDNN scratch memory in MiB; algorithms needing more are "
             "not used.");
DEFINE_bool(deterministic, false,
            "GPU: use only deterministic cuDNN algorithms, chosen by heuristics rather than "
            "timing, so repeated runs give identical results. train: also the solver's "
            "deterministic mode (seeded from random_seed, CPU results independent of the "
            "thread count).");
DEFINE_bool(check_nan, false,
            "train, test: after every layer's forward and backward, check its outputs and "
            "gradients; stop at the first NaN or infinity, naming the layer, the blob and the "
            "iteration (slower: one pass over every blob).");
DEFINE_bool(cuda_graph, true,
            "train, time, test: on a GPU, capture the iteration after the data layers (forward, "
            "backward and plain SGD's update) into one CUDA graph once it runs without allocating, "
            "and replay it every iteration (one launch instead of one per kernel; same values). "
            "A net with a layer that cannot be captured runs uncaptured and says which. "
            "--cuda-graph=false runs every iteration uncaptured.");
DEFINE_string(amp, "",
              "Mixed precision: off, fp16 or bf16. The blobs between layers are stored in half "
              "precision where the layer type allows (docs/amp.md), computing in float32 with "
              "float32 weights; fp16 training scales the loss dynamically. train: overrides the "
              "solver's amp field. Default: the solver's amp field, else off.");
DEFINE_int32(iterations, 50, "The number of iterations (batches) to run.");
DEFINE_string(phase, "", "Network phase: TRAIN or TEST.");
DEFINE_string(stage, "", "Network stages, separated by commas (NetState.stage).");
DEFINE_int32(level, 0, "Network level (NetState.level).");
DEFINE_bool(json, false, "Print machine-readable JSON instead of text.");
DEFINE_string(output_dir, "", "The folder to write outputs into (created when missing).");
DEFINE_string(
    set, "",
    "Override a solver field, FIELD=VALUE in prototxt syntax; repeat the flag for "
    "several. Nested fields with dots (train_state.level=1), repeated ones as a list "
    "(stepvalue=1000,2000), element i as FIELD[i]; net.LAYER.PATH=VALUE sets a field "
    "of every layer named LAYER in the solver's nets "
    "(net.conv1.convolution_param.num_output=32, net.fc8.param.lr_mult=0 for all its "
    "param blocks, net.fc8.param[1].lr_mult=0 for the bias only; see crema train --help).");
DEFINE_string(
    out, "",
    "Where the result goes. sweep: the sweep folder, one sub-folder per run, "
    "results.tsv and results.md (default: <snapshot_prefix folder>/sweep, or "
    "sweep/). plot: the image, .svg or .png. export-onnx: the .onnx file. classify, detect: "
    "the results file (default stdout). completion: the script (default stdout).");
DEFINE_string(progress, "auto",
              "auto: a live progress line when stdout is a terminal (train: iteration, smoothed "
              "loss, lr, it/s, ETA instead of the INFO log, unless --log_dir is set; convert-*: "
              "count, images/s, ETA instead of the periodic 'processed N files' lines); on; off.");
DEFINE_bool(memory_plan, true,
            "test, time, classify, detect, forward, extract-features, train: plan the activation "
            "memory (intermediate blobs whose lifetimes do not overlap share buffers; the outputs "
            "read are unchanged). --memory-plan=false gives every blob its own memory.");
DEFINE_bool(fold_bn, true,
            "test, time (TEST phase), classify, detect, forward (without --all_blobs), inspect: "
            "fold BatchNorm (with global statistics) and the Scale after it into the preceding "
            "Convolution, which then runs a folded copy of its weights (equal within float "
            "rounding; the weights saved or copied are unchanged; the copy costs the "
            "convolutions' weight memory again). --fold-bn=false runs the layers one by one, "
            "as Caffe does.");
DEFINE_string(
    cpu_engine, "",
    "CPU Convolution, Pooling, InnerProduct: auto (per layer and shape, oneDNN or "
    "crema's kernels, and for 3x3 stride-1 convolutions on AVX-512 oneDNN's Winograd "
    "convolution, and in inference on AVX-512 for 3x3 and 1x1 stride-1 convolutions and 3x3 "
    "depthwise ones crema's "
    "direct kernels on the channel-blocked layout (crema-blocked) too, as for global average "
    "pooling in inference, whichever times fastest "
    "in passes run as the net runs the layer: its "
    "fused ReLU, the caches filled as the other layers leave them; only the kernels of the "
    "blocked layout where a net keeps the data channel-blocked between layers; train and "
    "time decide "
    "before the first iteration and keep the choice in the .solverstate and in "
    "~/.cache/crema/cpu_engines.tsv, CREMA_CPU_ENGINE_CACHE=FILE|off), caffe (crema's kernels "
    "only, reproducible as before) or dnnl (oneDNN wherever it takes the layer, never "
    "Winograd). "
    "Empty: CREMA_CPU_ENGINE, else auto.");
DEFINE_string(backend, "lmdb", "The database backend: lmdb (leveldb where supported).");

namespace crema::cli {

bool LiveProgress() {
  if (FLAGS_progress != "auto" && FLAGS_progress != "on" && FLAGS_progress != "off")
    CREMA_THROW_CONFIG("--progress must be auto, on or off, got \"", FLAGS_progress, "\"");
  return FLAGS_progress == "on" || (FLAGS_progress == "auto" && isatty(STDOUT_FILENO));
}

std::vector<std::string> SplitList(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : text) {
    if (c == separator) {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

MemoryPlan MemoryPlanFromFlag(MemoryPlan planned) {
  return FLAGS_memory_plan ? planned : MemoryPlan::kOff;
}

void RequireFlag(const char* name, const std::string& value) {
  if (value.empty()) CREMA_THROW_CONFIG("--", name, " is required");
}

std::vector<int> GpuIdsFromFlag() {
  if (FLAGS_gpu.empty()) return {};
  if (FLAGS_gpu == "all") {
    const int count = CudaDeviceCount();
    if (count == 0) CREMA_THROW_RUNTIME("--gpu all: no CUDA device is visible");
    std::vector<int> ids(count);
    for (int i = 0; i < count; ++i) ids[i] = i;
    return ids;
  }
  std::vector<int> ids;
  for (const std::string& id : SplitList(FLAGS_gpu)) {
    if (id.empty() || id.size() > 4 ||
        !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }))
      CREMA_THROW_CONFIG("--gpu: expected a device id, a list of ids or 'all', got \"", FLAGS_gpu,
                         "\"");
    const int value = std::stoi(id);
    if (std::find(ids.begin(), ids.end(), value) != ids.end())
      CREMA_THROW_CONFIG("--gpu ", FLAGS_gpu, ": device ", value, " is listed twice");
    ids.push_back(value);
  }
  return ids;
}

Device DeviceFromFlags(int local_rank) {
  const std::vector<int> ids = GpuIdsFromFlag();
  if (ids.empty()) return Device::Cpu();
  if (ids.size() > 1 && local_rank < 0 && FLAGS_gpu != "all")
    CREMA_THROW_CONFIG("--gpu ", FLAGS_gpu,
                       ": only `crema train` runs on several GPUs; give one device id");
  const int id = ids[local_rank < 0 ? 0 : local_rank % static_cast<int>(ids.size())];
  if (id >= CudaDeviceCount())
    CREMA_THROW_RUNTIME("--gpu ", FLAGS_gpu, ": there is no CUDA device ", id, " (",
                        CudaDeviceCount(), " visible; crema device_query lists them)");
  SetCudaDevice(id);
  ApplyGpuMathFlags();
  return Device::Cuda(id);
}

void ApplyGpuMathFlags() {
  if (FLAGS_math == "fp32")
    gpu::SetMathMode(gpu::MathMode::kFp32);
  else if (FLAGS_math == "tf32")
    gpu::SetMathMode(gpu::MathMode::kTf32);
  else
    CREMA_THROW_CONFIG("--math must be fp32 or tf32, got \"", FLAGS_math, "\"");
  if (FLAGS_cudnn_workspace_mb < 0)
    CREMA_THROW_CONFIG("--cudnn_workspace_mb must be >= 0, got ", FLAGS_cudnn_workspace_mb);
  gpu::SetWorkspaceLimit(static_cast<size_t>(FLAGS_cudnn_workspace_mb) << 20);
  gpu::SetDeterministic(FLAGS_deterministic);
}

void ApplyCpuEngineFlag() {
  if (!FLAGS_cpu_engine.empty()) SetCpuEngine(ParseCpuEngine(FLAGS_cpu_engine, "--cpu_engine"));
  if (GetCpuEngine() == CpuEngine::kDnnl && !DnnlBuilt())
    LOG(WARNING) << "--cpu_engine=dnnl: this crema was built without oneDNN; crema's kernels run";
}

Phase PhaseFromFlag(Phase fallback) {
  if (FLAGS_phase.empty()) return fallback;
  std::string p = FLAGS_phase;
  std::transform(p.begin(), p.end(), p.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (p == "TRAIN") return TRAIN;
  if (p == "TEST") return TEST;
  CREMA_THROW_CONFIG("--phase must be TRAIN or TEST, got \"", FLAGS_phase, "\"");
}

std::vector<std::string> StagesFromFlag() { return SplitList(FLAGS_stage); }

std::vector<std::string> RepeatedFlagValues(const std::string& value) {
  return SplitList(value, kRepeatedFlagSeparator);
}

Amp AmpFromFlag() {
  Amp amp = Amp::kOff;
  if (!FLAGS_amp.empty() && !AmpFromName(FLAGS_amp, &amp))
    CREMA_THROW_CONFIG("--amp must be off, fp16 or bf16, got \"", FLAGS_amp, "\"");
  return amp;
}

void ApplyAmpFlag(SolverParameter* param) {
  if (FLAGS_amp.empty()) return;
  const Amp amp = AmpFromFlag();
  param->set_amp(amp == Amp::kFloat16    ? SolverParameter::FP16
                 : amp == Amp::kBFloat16 ? SolverParameter::BF16
                                         : SolverParameter::AMP_OFF);
}

}  // namespace crema::cli
