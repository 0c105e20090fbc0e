#include "fuzz_support.hpp"

#include <glog/logging.h>
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace crema::fuzz {

namespace {
std::string& WorkDirStorage() {
  static std::string dir;
  return dir;
}
}  // namespace

void Init() {
  FLAGS_minloglevel = 3;
  google::protobuf::SetLogHandler(nullptr);  // e.g. "invalid UTF-8" for every mutated string
  FLAGS_logtostderr = true;
  setenv("CREMA_MAX_BLOB_ELEMENTS", "4194304", /*overwrite=*/0);
  std::string pattern = (std::filesystem::temp_directory_path() / "crema-fuzz-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  WorkDirStorage() = pattern;
  // Removed at exit; libFuzzer exits with exit() after -max_total_time.
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(WorkDirStorage(), ec);
  });
}

const std::string& WorkDir() { return WorkDirStorage(); }

std::string WriteFile(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = WorkDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  return WriteFile(name, reinterpret_cast<const uint8_t*>(contents.data()), contents.size());
}

void CheckMessage(const Error& error, const std::string& must_mention) {
  const std::string message = error.what();
  const char* problem = nullptr;
  if (message.empty()) {
    problem = "an empty error message";
  } else if (!must_mention.empty() && message.find(must_mention) == std::string::npos) {
    problem = "an error message that does not name the input";
  }
  if (problem != nullptr) {
    std::fprintf(stderr, "fuzz: %s (should mention \"%s\"): %s\n", problem, must_mention.c_str(),
                 message.c_str());
    std::abort();
  }
}

}  // namespace crema::fuzz

namespace crema::fuzz {

const char kSmallNet[] = R"(name: "fuzz"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } shape { dim: 2 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "scale" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

}  // namespace crema::fuzz
