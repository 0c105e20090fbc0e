// crema forward: one forward pass on inputs from .npy/.binaryproto files; outputs as .npy.
#include <glog/logging.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "io/npy.hpp"
#include "net/weights_match.hpp"
#include "verb.hpp"

DEFINE_string(input, "",
              "NAME=FILE: fill the net input blob NAME from FILE (.npy float32/float64 in C order, "
              "or a .binaryproto BlobProto) and reshape it to the file's shape. Several inputs: "
              "--input a=x.npy,b=y.npy, or repeat --input.");
DEFINE_bool(all_blobs, false, "Write every blob of the net, not only the net outputs.");

namespace crema::cli {
namespace {

// --input may be repeated; crema.cpp joins the occurrences with commas.
std::vector<std::string> InputValues() { return SplitList(FLAGS_input); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Blob names may contain '/' and the like: keep [A-Za-z0-9_.-], replace the rest with '~'.
std::string FileNameFor(const std::string& blob) {
  std::string out = blob;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '~';
  return out;
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + ")";
}

void LoadInput(const std::string& path, Blob* blob) {
  if (EndsWith(path, ".binaryproto")) {
    ReadBlobFromBinaryFile(path, blob);
  } else if (EndsWith(path, ".npy")) {
    ReadNpyIntoBlob(path, blob);
  } else {
    CREMA_THROW_CONFIG("--input ", path, ": expected a .npy or .binaryproto file");
  }
}

int RunForward(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  RequireFlag("output_dir", FLAGS_output_dir);
  const Device device = DeviceFromFlags();
  const Phase phase = PhaseFromFlag(TEST);
  std::unique_ptr<Net> net = Net::FromFile(
      FLAGS_model, phase, FLAGS_level, StagesFromFlag(), device,
      FLAGS_all_blobs ? MemoryPlan::kOff : MemoryPlanFromFlag(MemoryPlan::kInference));
  for (const std::string& weights : SplitList(FLAGS_weights))
    CopyWeightsRequiringAMatch(net.get(), weights);
  // Only the outputs are written: BatchNorm (+ Scale) may fold into the convolutions.
  net->SetFoldBatchNorm(FLAGS_fold_bn && !FLAGS_all_blobs);

  std::string input_names;
  for (int id : net->input_blob_indices())
    input_names += (input_names.empty() ? "" : ", ") + net->blob_names()[id];
  for (const std::string& pair : InputValues()) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      CREMA_THROW_CONFIG("--input expects NAME=FILE, got \"", pair, "\"");
    const std::string name = pair.substr(0, eq), path = pair.substr(eq + 1);
    int index = -1;
    for (size_t i = 0; i < net->input_blob_indices().size(); ++i)
      if (net->blob_names()[net->input_blob_indices()[i]] == name) index = static_cast<int>(i);
    if (index < 0)
      CREMA_THROW_CONFIG("--input ", pair, ": \"", name, "\" is not an input blob of net \"",
                         net->name(), "\" (inputs: ", input_names.empty() ? "none" : input_names,
                         ")");
    Blob* blob = net->input_blobs()[index];
    LoadInput(path, blob);
    LOG(INFO) << "Input " << name << " " << ShapeText(blob->shape()) << " from " << path;
  }
  net->Reshape();
  const double loss = net->Forward();
  LOG(INFO) << "Forward done, loss " << loss;

  std::error_code ec;
  std::filesystem::create_directories(FLAGS_output_dir, ec);
  if (ec)
    CREMA_THROW_RUNTIME("--output_dir ", FLAGS_output_dir, ": cannot create it (", ec.message(),
                        ")");
  std::vector<int> ids;
  if (FLAGS_all_blobs) {
    for (size_t i = 0; i < net->blobs().size(); ++i) ids.push_back(static_cast<int>(i));
  } else {
    ids = net->output_blob_indices();
  }
  for (int id : ids) {
    const std::string& name = net->blob_names()[id];
    const std::string path = FLAGS_output_dir + "/" + FileNameFor(name) + ".npy";
    WriteBlobNpy(path, *net->blobs()[id]);
    std::printf("%s %s -> %s\n", name.c_str(), ShapeText(net->blobs()[id]->shape()).c_str(),
                path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(forward, "forward",
                    "run one forward pass on inputs from files; write the outputs as .npy",
                    "crema forward --model NET.prototxt [--weights W.caffemodel] "
                    "--input NAME=FILE[,NAME=FILE] [--input NAME=FILE] --output_dir DIR "
                    "[--all_blobs] [--phase TEST] [--gpu ID]\n\n"
                    "Each input blob is reshaped to its file's shape (.npy float32/float64 C "
                    "order, or .binaryproto), the net is reshaped and run forward once, and each "
                    "net output (every blob with --all_blobs) is written as DIR/<blob>.npy "
                    "(float32; characters outside [A-Za-z0-9_.-] in the name become '~').",
                    {"memory_plan", "fold_bn", "amp", "model", "weights", "input", "output_dir",
                     "all_blobs", "phase", "stage", "level", "gpu", "math", "cudnn_workspace_mb",
                     "deterministic"},
                    &crema::cli::RunForward);
