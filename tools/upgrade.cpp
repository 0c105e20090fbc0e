// crema upgrade IN OUT: rewrites a legacy Caffe file in the current format, as Caffe's
// upgrade_net_proto_text, upgrade_net_proto_binary and upgrade_solver_proto_text together.
#include "net/upgrade.hpp"

#include <gflags/gflags.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "verb.hpp"

DEFINE_bool(in_place, false, "upgrade: rewrite IN itself (OUT may then be left out).");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

enum class Kind { kNetText, kNetBinary, kSolverText };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNetText:
      return "net prototxt";
    case Kind::kNetBinary:
      return "binary net (.caffemodel)";
    case Kind::kSolverText:
      return "solver prototxt";
  }
  return "";
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool LooksBinary(const std::string& path, const std::string& bytes) {
  if (EndsWith(path, ".caffemodel") || EndsWith(path, ".binaryproto")) return true;
  if (EndsWith(path, ".prototxt") || EndsWith(path, ".pt") || EndsWith(path, ".txt")) return false;
  for (unsigned char c : bytes)
    if (c == 0 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v'))
      return true;
  return false;
}

// A solver prototxt names solver-only fields; a net prototxt names layers.
bool LooksLikeSolver(const std::string& path, const std::string& text) {
  for (const char* word : {"base_lr", "solver_type", "max_iter", "lr_policy", "test_iter",
                           "train_net", "snapshot_prefix"})
    if (text.find(word) != std::string::npos) return true;
  return fs::path(path).filename().string().find("solver") != std::string::npos &&
         text.find("layer") == std::string::npos;
}

void Report(const std::string& in, Kind kind, const std::vector<std::string>& steps) {
  if (steps.empty()) {
    std::printf("%s: %s already in the current format; nothing to upgrade\n", in.c_str(),
                KindName(kind));
    return;
  }
  std::printf("%s: %s, upgraded:\n", in.c_str(), KindName(kind));
  for (const std::string& step : steps) std::printf("  %s\n", step.c_str());
}

int RunUpgrade(const std::vector<std::string>& args) {
  if (args.empty() || args.size() > 2 || (args.size() == 1 && !FLAGS_in_place))
    CREMA_THROW_CONFIG("upgrade takes IN OUT (or IN --in-place), got ", args.size(),
                       " argument(s) (crema upgrade --help)");
  const std::string& in = args[0];
  const std::string out = args.size() == 2 ? args[1] : in;
  std::error_code ec;
  if (!fs::exists(in, ec)) CREMA_THROW_RUNTIME("cannot read ", in, ": no such file");
  const bool same = fs::equivalent(in, out, ec) || out == in;
  if (same && !FLAGS_in_place)
    CREMA_THROW_CONFIG("upgrade: OUT is IN (", in, "); pass --in-place to overwrite it");

  std::ifstream stream(in, std::ios::binary);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  if (!stream) CREMA_THROW_RUNTIME("cannot read ", in);
  const std::string bytes = buffer.str();
  if (bytes.rfind("\x89HDF", 0) == 0)
    CREMA_THROW_CONFIG(in, ": HDF5 weights (.caffemodel.h5) have no legacy format to upgrade");

  std::vector<std::string> steps;
  Kind kind;
  if (LooksBinary(in, bytes)) {
    kind = Kind::kNetBinary;
    if (EndsWith(in, ".binaryproto") || EndsWith(in, ".solverstate"))
      CREMA_THROW_CONFIG(in,
                         ": only nets (.caffemodel), net prototxts and solver prototxts are "
                         "upgraded; this file has no legacy format");
    NetParameter net;
    ReadBinaryProto(in, &net);
    UpgradeNetAsNeeded(in, &net, &steps);
    Report(in, kind, steps);
    if (!(same && steps.empty())) WriteBinaryProto(net, out);
  } else if (LooksLikeSolver(in, bytes)) {
    kind = Kind::kSolverText;
    SolverParameter solver;
    ParseTextProto(bytes, in, &solver);  // ConfigError file:line:col
    UpgradeSolverAsNeeded(in, &solver, &steps);
    Report(in, kind, steps);
    if (!(same && steps.empty())) WriteTextProto(solver, out);
  } else {
    kind = Kind::kNetText;
    NetParameter net;
    ParseTextProto(bytes, in, &net);
    UpgradeNetAsNeeded(in, &net, &steps);
    Report(in, kind, steps);
    if (!(same && steps.empty())) WriteTextProto(net, out);
  }
  if (same && steps.empty()) return 0;
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    upgrade, "upgrade", "rewrite a legacy Caffe net, .caffemodel or solver in the current format",
    "crema upgrade IN OUT [--in-place]\n"
    "  IN is a net prototxt, a binary .caffemodel or a solver prototxt, told apart by extension\n"
    "  and content (binary bytes; solver fields such as base_lr, max_iter, lr_policy). Upgrades,\n"
    "  as Caffe's upgrade_net_proto_text/_binary and upgrade_solver_proto_text: V0 nets (layers\n"
    "  { layer {} }, padding layers folded into convolutions) to V1 to V2 (`layer` with string\n"
    "  types, param specs from blobs_lr/weight_decay); transformation fields of data layers into\n"
    "  transform_param; input/input_dim/input_shape into an Input layer; BatchNorm param specs;\n"
    "  solver_type enums into the `type` string (and nets inlined in a solver). Text in, text\n"
    "  out (comments are not kept); binary in, binary out. Prints each upgrade done, or that\n"
    "  there was nothing to do. OUT must differ from IN unless --in-place (then OUT may be left\n"
    "  out, and a file already current is not rewritten). Errors name file:line:col.\n"
    "  crema reads legacy files directly too, with a one-line notice of what it upgraded.",
    {"in_place"}, &crema::cli::RunUpgrade);
