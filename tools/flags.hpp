#pragma once
// Flags used by more than one verb (defined in flags.cpp).
#include <gflags/gflags.h>

#include <string>
#include <vector>

#include "crema/device.hpp"
#include "crema/net.hpp"
#include "crema/proto.hpp"

DECLARE_string(solver);
DECLARE_string(model);
DECLARE_string(weights);
DECLARE_string(snapshot);
DECLARE_string(gpu);
DECLARE_string(math);
DECLARE_int32(cudnn_workspace_mb);
DECLARE_bool(deterministic);
DECLARE_int32(iterations);
DECLARE_string(phase);
DECLARE_string(stage);
DECLARE_int32(level);
DECLARE_bool(json);
DECLARE_string(output_dir);
DECLARE_string(out);
DECLARE_bool(check_nan);
DECLARE_bool(cuda_graph);
DECLARE_string(amp);
DECLARE_string(backend);
DECLARE_string(set);
DECLARE_string(progress);
DECLARE_bool(memory_plan);
DECLARE_bool(fold_bn);
DECLARE_string(cpu_engine);

namespace crema::cli {

// --gpu: "" -> none; "0,2" -> {0, 2}; "all" -> every visible device (RuntimeError without
// one); ConfigError for anything else.
std::vector<int> GpuIdsFromFlag();
// The device of --gpu ("" -> CPU), made current with the --math settings. A list of ids is for
// `crema train`, whose ranks pass their rank on this machine (`local_rank`) to pick theirs;
// elsewhere (local_rank < 0) a list is a ConfigError and "all" means the first device.
Device DeviceFromFlags(int local_rank = -1);
// --math, --cudnn_workspace_mb, --deterministic -> the process-wide GPU settings.
void ApplyGpuMathFlags();
// --cpu_engine (else CREMA_CPU_ENGINE) -> the process-wide CPU engine policy; ConfigError for a
// value other than auto, caffe, dnnl.
void ApplyCpuEngineFlag();
// --phase TRAIN|TEST (case-insensitive); ConfigError otherwise. `fallback` when empty.
Phase PhaseFromFlag(Phase fallback);
// --stage a,b,c
std::vector<std::string> StagesFromFlag();
std::vector<std::string> SplitList(const std::string& text, char separator = ',');
// Flags whose values may contain commas (--set, --grid) keep every repetition: crema.cpp joins
// them with this separator, and RepeatedFlagValues splits them back.
constexpr char kRepeatedFlagSeparator = '\n';
std::vector<std::string> RepeatedFlagValues(const std::string& value);
// --progress auto|on|off (ConfigError otherwise): whether to draw a live line on stdout (on, or
// auto with stdout a terminal).
bool LiveProgress();
// --memory-plan: `planned` (the verb's plan when it reads only net outputs), or kOff.
MemoryPlan MemoryPlanFromFlag(MemoryPlan planned);
// --amp (off when empty; ConfigError for another value): crema.cpp makes it the nets' default.
Amp AmpFromFlag();
// --amp, when given, as the solver's amp field.
void ApplyAmpFlag(SolverParameter* param);
// ConfigError "--NAME is required" when the flag is empty.
void RequireFlag(const char* name, const std::string& value);

}  // namespace crema::cli
