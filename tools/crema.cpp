// crema: the command-line front end. `crema VERB [flags]`; `crema --help`, `crema VERB --help`.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"
#include "crema/plugin.hpp"
#include "crema/version.hpp"
#include "flags.hpp"
#include "io/input_checks.hpp"
#include "math/blas_setup.hpp"
#include "verb.hpp"

DEFINE_string(plugin, "",
              "Shared libraries (.so) to load before the verb runs, for their layer types: "
              "repeat the flag or separate paths with commas. CREMA_PLUGIN_PATH (a "
              "colon-separated list of .so files or folders) is loaded too.");
DEFINE_bool(forbid_path_escape, false,
            "ImageData/WindowData: a path in a list file that is absolute or leaves root_folder "
            "through '..' is an error naming the list file and line (also "
            "CREMA_FORBID_PATH_ESCAPE=1).");
DEFINE_bool(fuse_relu, true,
            "An in-place ReLU runs inside the Convolution, InnerProduct, Eltwise or Scale that "
            "produced its input, and on the CPU its gradient inside the Concat, Split or Pooling "
            "that alone reads its output (one pass over memory less each way; every value the "
            "same). --fuse-relu=false runs it as a layer of its own.");
DEFINE_bool(fuse_batch_norm, true,
            "A BatchNorm followed by an in-place per-channel Scale (and ReLU) of its output: the "
            "Scale reads the BatchNorm's kept output instead of copying its input, and the "
            "three run as one pass forward and two backward, on the CPU and the GPU (every "
            "value the same). "
            "--fuse-batch-norm=false runs them as layers of their own.");

DEFINE_bool(fuse_sum, true,
            "Inference on the CPU with oneDNN: a residual Eltwise SUM (ResNet's shortcut) is "
            "added inside the convolution that produced its other input, with the Eltwise's ReLU "
            "(one pass over memory less; every value the same). --fuse-sum=false runs it as a "
            "layer of its own.");
DEFINE_bool(fuse_depthwise, true,
            "Inference on the CPU with oneDNN and AVX-512: a 3x3 depthwise convolution that "
            "alone reads a 1x1 convolution's output (MobileNet's blocks), where that output "
            "is larger than half a core's L2 cache, is computed by the 1x1 convolution row by "
            "row, its output never written whole (every value the same as oneDNN's two "
            "layers). --fuse-depthwise=false runs them as layers of their own.");
DEFINE_bool(
    channel_blocked, true,
    "On the CPU with oneDNN, under a memory plan (train, test, time, forward, classify, "
    "detect): activations between oneDNN layers (convolutions, pooling) "
    "and the BatchNorm groups, elementwise or channel-concatenating layers between them stay "
    "in oneDNN's "
    "channel-blocked layout instead of being reordered in and out at every layer, and "
    "in training their gradients too (inputs, outputs and kept blobs stay plain; the "
    "results are the same). --channel-blocked=false reorders at every layer.");

namespace crema::cli {

const std::set<std::string>& GlobalFlags() {
  static const std::set<std::string> flags = {"plugin",    "forbid_path_escape", "cpu_engine",
                                              "fuse_relu", "fuse_batch_norm",    "channel_blocked",
                                              "fuse_sum",  "fuse_depthwise"};
  return flags;
}

namespace {

void PrintGlobalFlags() {
  for (const std::string& name : GlobalFlags()) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) continue;
    std::printf("  --%s (%s, default \"%s\")\n      %s\n", info.name.c_str(), info.type.c_str(),
                info.default_value.c_str(), info.description.c_str());
  }
}

std::vector<Verb>& VerbTable() {
  static auto* verbs = new std::vector<Verb>();
  return *verbs;
}

const Verb* FindVerb(const std::string& name) {
  for (const Verb& v : Verbs()) {
    if (name == v.name) return &v;
    // Caffe's tools use underscores (convert_mnist); accept both spellings.
    std::string alt = name;
    for (char& c : alt) c = c == '_' ? '-' : c;
    if (alt == v.name) return &v;
  }
  return nullptr;
}

void PrintMainHelp() {
  std::printf(
      "crema %s: declarative deep learning, file-compatible with Caffe.\n\n"
      "usage: crema VERB [flags]\n\nverbs:\n",
      VersionString());
  for (const Verb& v : Verbs()) std::printf("  %-18s %s\n", v.name, v.summary);
  std::printf(
      "\n`crema VERB --help` explains a verb's flags. Common flags: --log_dir, --v (glog).\n"
      "Exit codes: 0 success, 1 runtime error (missing file, no GPU), 2 usage or config error.\n"
      "\nflags of every verb:\n");
  PrintGlobalFlags();
  std::printf(
      "\nPlugins add layer types without rebuilding crema: `crema VERB --plugin libmy_layers.so "
      "...`\nor CREMA_PLUGIN_PATH=dir_or_so:...; `crema layers --plugin X.so` lists what X "
      "adds.\n");
}

void PrintVerbHelp(const Verb& verb) {
  std::printf("crema %s: %s\n\nusage: %s\n", verb.name, verb.summary, verb.usage);
  if (!verb.flags.empty()) std::printf("\nflags:\n");
  for (const std::string& name : verb.flags) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) continue;
    std::printf("  --%s (%s, default \"%s\")\n      %s\n", info.name.c_str(), info.type.c_str(),
                info.default_value.c_str(), info.description.c_str());
  }
  std::printf("\nflags of every verb:\n");
  PrintGlobalFlags();
}

// Loads CREMA_PLUGIN_PATH, then every --plugin, so their layer types exist when the verb runs.
void LoadPlugins() {
  LoadPluginsFromEnv();
  for (const std::string& path : SplitList(FLAGS_plugin)) LoadPlugin(path);
}

// A crema flag (defined under tools/) set on the command line but not read by the verb.
void CheckUnusedFlags(const Verb& verb) {
  std::set<std::string> accepted(verb.flags.begin(), verb.flags.end());
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const auto& info : all) {
    if (info.is_default || accepted.count(info.name) || GlobalFlags().count(info.name)) continue;
    if (info.filename.find("tools/") == std::string::npos) continue;  // glog's own flags
    CREMA_THROW_CONFIG("--", info.name, " is not a flag of `crema ", verb.name, "` (crema ",
                       verb.name, " --help lists its flags)");
  }
}

// Re-executes crema with OPENBLAS_CORETYPE set when OpenBLAS picked generic kernels.
void FixOpenBlas(char** argv) {
  const char* opt = std::getenv("CREMA_OPENBLAS_FIX");
  if (opt != nullptr && std::strcmp(opt, "0") == 0) return;
  const std::string better = BetterOpenBlasCoreType();
  if (better.empty()) return;
  std::fprintf(stderr,
               "crema: OpenBLAS chose its generic '%s' kernels for this CPU; restarting with "
               "OPENBLAS_CORETYPE=%s (set CREMA_OPENBLAS_FIX=0 to keep them)\n",
               OpenBlasCoreName().c_str(), better.c_str());
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "crema: restart failed (%s); continuing with the generic kernels\n",
               std::strerror(errno));
}

bool IsFlag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && arg != "--" &&
         !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

// gflags keeps only the last value of a repeated flag; list flags (--input a=x --input b=y)
// are joined with commas instead, which their verbs split (--set and --grid, whose values hold
// commas, with kRepeatedFlagSeparator).
std::vector<std::string> MergeRepeatedListFlags(const std::vector<std::string>& args) {
  static const std::map<std::string, char> kListFlags = {{"input", ','},
                                                         {"plugin", ','},
                                                         {"set", kRepeatedFlagSeparator},
                                                         {"freeze", kRepeatedFlagSeparator},
                                                         {"grid", kRepeatedFlagSeparator}};
  std::vector<std::string> out;
  std::map<std::string, size_t> position;  // flag -> index in `out` of its "--flag=value"
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    const size_t start = arg.rfind("--", 0) == 0 ? 2 : (arg.rfind('-', 0) == 0 ? 1 : 0);
    const std::string body = arg.substr(start);
    const std::string name = body.substr(0, body.find('='));
    if (start == 0 || !kListFlags.count(name)) {
      out.push_back(arg);
      continue;
    }
    std::string value;
    if (body.find('=') != std::string::npos) {
      value = body.substr(body.find('=') + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
    auto it = position.find(name);
    if (it == position.end()) {
      position[name] = out.size();
      out.push_back("--" + name + "=" + value);
    } else {
      out[it->second] += kListFlags.at(name) + value;
    }
  }
  return out;
}

}  // namespace

void RegisterVerb(const Verb& verb) { VerbTable().push_back(verb); }
const std::vector<Verb>& Verbs() { return VerbTable(); }

}  // namespace crema::cli

int main(int argc, char** argv) {
  using namespace crema::cli;
  FixOpenBlas(argv);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-help") == 0 ||
      std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "help") == 0) {
    PrintMainHelp();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0) {
    std::printf("%s\n", crema::BuildInfo());
    return 0;
  }
  const Verb* verb = FindVerb(argv[1]);
  if (verb == nullptr) {
    std::fprintf(stderr, "error: unknown verb \"%s\" (crema --help lists them)\n", argv[1]);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      PrintVerbHelp(*verb);
      return 0;
    }
  }
  // Flags after the verb, Caffe style (-f v, --f=v, --bool, --nobool), parsed here so that an
  // unknown flag or a bad value is one clear line and exit code 2. Names may use dashes
  // (--output-dir) or underscores (--output_dir).
  std::vector<std::string> storage;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (IsFlag(arg)) {
      const size_t start = arg[1] == '-' ? 2 : 1;
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t c = start; c < end; ++c)
        if (arg[c] == '-') arg[c] = '_';
    }
    storage.push_back(arg);
  }
  storage = MergeRepeatedListFlags(storage);
  std::vector<std::string> positional;
  for (size_t i = 0; i < storage.size(); ++i) {
    const std::string& arg = storage[i];
    if (arg == "--") {
      positional.insert(positional.end(), storage.begin() + static_cast<long>(i) + 1,
                        storage.end());
      break;
    }
    if (!IsFlag(arg)) {
      positional.push_back(arg);
      continue;
    }
    const std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    gflags::CommandLineFlagInfo info;
    std::string value;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      if (eq != std::string::npos) {
        value = body.substr(eq + 1);
      } else if (info.type == "bool") {
        value = "true";
      } else if (i + 1 < storage.size()) {
        value = storage[++i];
      } else {
        std::fprintf(stderr, "error: --%s needs a value (crema %s --help)\n", name.c_str(),
                     verb->name);
        return 2;
      }
    } else if (name.rfind("no", 0) == 0 && eq == std::string::npos &&
               gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
               info.type == "bool") {
      name = name.substr(2);
      value = "false";
    } else {
      std::fprintf(stderr, "error: unknown flag --%s for `crema %s` (crema %s --help)\n",
                   name.c_str(), verb->name, verb->name);
      return 2;
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      std::fprintf(stderr, "error: invalid value \"%s\" for --%s (%s)\n", value.c_str(),
                   name.c_str(), info.type.c_str());
      return 2;
    }
  }
  FLAGS_logtostderr = FLAGS_log_dir.empty();
  FLAGS_colorlogtostderr = isatty(2) != 0;
  google::InitGoogleLogging(argv[0]);
  try {
    CheckUnusedFlags(*verb);
    if (FLAGS_forbid_path_escape) crema::SetForbidPathEscape(true);
    crema::SetFuseReLUDefault(FLAGS_fuse_relu);
    crema::SetFuseBatchNormDefault(FLAGS_fuse_batch_norm);
    crema::SetChannelBlockedDefault(FLAGS_channel_blocked);
    crema::SetFuseSumDefault(FLAGS_fuse_sum);
    crema::SetFuseDepthwiseDefault(FLAGS_fuse_depthwise);
    crema::SetAmpDefault(AmpFromFlag());
    ApplyCpuEngineFlag();
    LoadPlugins();
    return verb->run(positional);
  } catch (const crema::ConfigError& e) {
    // One line, whatever names from the user's files the message quotes.
    std::fprintf(stderr, "error: %s\n", crema::OneLineMessage(e.what()).c_str());
    return 2;
  } catch (const crema::RuntimeError& e) {
    std::fprintf(stderr, "error: %s\n", crema::OneLineMessage(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", crema::OneLineMessage(e.what()).c_str());
    return 1;
  }
}
