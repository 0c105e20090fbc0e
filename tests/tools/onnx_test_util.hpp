#pragma once
// Shared by onnx_test.cpp and onnx_zoo_test.cpp: running tests/tools/onnx_check.py
// (onnx.checker + onnxruntime from the `python3` on PATH) on an exported model with a net's
// inputs, and reading back what onnxruntime computed.
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "crema/net.hpp"
#include "io/npy.hpp"
#include "support/run_command.hpp"

namespace crema::onnx_test {

// onnx_check.py's exit status when python3 lacks numpy, onnx or onnxruntime.
constexpr int kOnnxRuntimeMissing = 77;

inline int RunCommand(const std::string& command, std::string* output) {
  testing::CommandResult result = testing::RunCommand(command);
  *output = std::move(result.output);
  return result.rc;
}

inline std::vector<float> BlobValues(const Blob& blob) {
  const float* data = blob.cpu_data<float>();
  return std::vector<float>(data, data + blob.count());
}

// Checks `model_path` and runs it in onnxruntime with the net's input blobs as feeds (named
// after the blobs); outputs land in DIR/ort. Returns the script's exit status
// (kOnnxRuntimeMissing: skip), its log in *log.
inline int RunOnnxCheck(Net* net, const std::string& model_path, const std::string& dir,
                        std::string* log) {
  std::string feeds;
  for (size_t i = 0; i < net->input_blobs().size(); ++i) {
    const std::string name = net->blob_names()[net->input_blob_indices()[i]];
    const std::string path = StrCat(dir, "/in", i, ".npy");
    WriteBlobNpy(path, *net->input_blobs()[i]);
    feeds += " '" + name + "=" + path + "'";
  }
  return RunCommand(StrCat("python3 ", CREMA_SOURCE_DIR, "/tests/tools/onnx_check.py ", model_path,
                           " ", dir, "/ort", feeds),
                    log);
}

// The output `name` onnxruntime wrote under DIR/ort (characters outside [A-Za-z0-9_.-] -> '~').
inline NpyArray ReadOrtOutput(const std::string& dir, const std::string& name) {
  std::string file = name;
  for (char& c : file)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '~';
  return ReadNpy(dir + "/ort/" + file + ".npy");
}

}  // namespace crema::onnx_test
