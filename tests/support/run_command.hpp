#pragma once
// Runs a shell command for the tests that drive executables (`crema`, a test binary, a tool):
// its exit status and what it printed, stdout and stderr together.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace crema::testing {

struct CommandResult {
  int rc = -1;         // the exit status; 128 + the signal when killed; -1 when it did not start
  std::string output;  // stdout and stderr together
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Runs this build's `crema ARGS` (CREMA_OPENBLAS_FIX=0: no re-exec to pin OpenBLAS's threads).
inline CommandResult RunCrema(const std::string& args) {
  return RunCommand("CREMA_OPENBLAS_FIX=0 " + std::string(CREMA_BINARY_DIR) + "/crema " + args);
}

}  // namespace crema::testing
