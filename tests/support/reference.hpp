#pragma once
// Access to ../shared/reference (BVLC Caffe outputs). Tests that need it skip cleanly when it is
// absent: CREMA_REQUIRE_REFERENCE(path) sets `path` or calls GTEST_SKIP.
#include <string>
#include <vector>

namespace crema::testing {

// The reference folder (env CREMA_REFERENCE_DIR, else <source>/../shared/reference), or "" when
// it does not exist.
std::string ReferenceDir();
// ReferenceDir() + "/" + relative, or "" when that file or folder does not exist.
std::string ReferencePath(const std::string& relative);
// A fresh, empty temporary directory, removed at exit.
std::string TempDir();
// Reads a whole file; "" when missing.
std::string ReadFile(const std::string& path);
// Reads raw little-endian float32 values (the reference *.f32 dumps).
std::vector<float> ReadF32(const std::string& path);

}  // namespace crema::testing

#define CREMA_REQUIRE_REFERENCE(var, relative)                 \
  std::string var = ::crema::testing::ReferencePath(relative); \
  if (var.empty()) GTEST_SKIP() << "reference data not found: " << (relative)
