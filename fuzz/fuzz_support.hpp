#pragma once
// Shared by the libFuzzer targets: set-up (quiet logs, a private working folder, a small blob
// bound), writing an input to a file, and the outcome rule: crema's ConfigError and RuntimeError
// are the normal answer to a bad input; anything else escaping (another exception, an abort, a
// sanitizer report) is a finding. A file-reading path must also name the file in its error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crema/error.hpp"

namespace crema::fuzz {

// Call from LLVMFuzzerInitialize: glog to FATAL only, CREMA_MAX_BLOB_ELEMENTS 2^22 (unless set),
// and a fresh temporary folder for the files written from inputs (removed at exit). Inputs may
// name other files, relative to the current folder: scripts/fuzz.sh runs each target in its own.
void Init();
// The working folder Init made.
const std::string& WorkDir();
// Writes `size` bytes to WorkDir()/name and returns the path.
std::string WriteFile(const std::string& name, const uint8_t* data, size_t size);
std::string WriteFile(const std::string& name, const std::string& contents);

// An empty error message, or one that does not mention `must_mention` (when given): a finding
// (abort with the message). (Line breaks are allowed: names from files may hold them; the CLI
// prints every message on one line.)
void CheckMessage(const Error& error, const std::string& must_mention);

// Runs `body`; returns true when it finished, false when it threw ConfigError or RuntimeError
// whose message is not empty and mentions `must_mention` (when not empty). Anything else
// propagates: libFuzzer reports it.
template <typename Body>
bool Expect(const std::string& must_mention, Body&& body) {
  try {
    body();
    return true;
  } catch (const ConfigError& e) {
    CheckMessage(e, must_mention);
  } catch (const RuntimeError& e) {
    CheckMessage(e, must_mention);
  }
  return false;
}

}  // namespace crema::fuzz

namespace crema::fuzz {

// A small net with every kind of parameter blob the loaders handle (convolution, batch norm,
// scale with bias, inner product) and a loss, so a solver can be built on it: the net the
// .caffemodel, .solverstate and ONNX targets load into, and their seeds come from.
extern const char kSmallNet[];

}  // namespace crema::fuzz
