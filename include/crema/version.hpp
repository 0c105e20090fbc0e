#pragma once

namespace crema {
constexpr int kVersionMajor = 0;
constexpr int kVersionMinor = 1;
constexpr int kVersionPatch = 0;
const char* VersionString();  // "0.1.0"
const char* GitCommit();      // the source tree's commit at build time, "unknown" without git
// `crema --version`: version and commit, then one line each for the compiler and the optional
// libraries (CUDA, cuDNN, NCCL, oneDNN, MPI, OpenCV, LevelDB): "yes" and the version built
// against, or "not built".
const char* BuildInfo();
}  // namespace crema
