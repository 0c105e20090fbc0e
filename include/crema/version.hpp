#pragma once

namespace crema {
constexpr int kVersionMajor = 0;
constexpr int kVersionMinor = 1;
constexpr int kVersionPatch = 0;
const char* VersionString();
const char* BuildInfo();  // compiler, BLAS, CUDA/cuDNN when built with them
}  // namespace crema
