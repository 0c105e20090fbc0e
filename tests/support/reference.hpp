#pragma once
// Access to ../shared/reference (BVLC Caffe outputs). Tests that need it skip cleanly when it is
// absent: CREMA_REQUIRE_REFERENCE(path) sets `path` or calls GTEST_SKIP -- or, where the data
// must be there (CREMA_REQUIRE_REFERENCE=1 in the environment, as .ci/run sets it), fails.
#include <string>
#include <vector>

namespace crema::testing {

// The reference folder (env CREMA_REFERENCE_DIR, else <source>/../shared/reference), or "" when
// it does not exist.
std::string ReferenceDir();
// The folder ReferenceDir looks for (for messages).
std::string ReferenceDirWanted();
// ReferenceDir() + "/" + relative, or "" when that file or folder does not exist.
std::string ReferencePath(const std::string& relative);
// Whether missing reference data is a failure rather than a skip (CREMA_REQUIRE_REFERENCE=1).
bool ReferenceRequired();
// A fresh, empty temporary directory, removed at exit.
std::string TempDir();
// Reads a whole file; "" when missing.
std::string ReadFile(const std::string& path);
// Reads raw little-endian float32 values (the reference *.f32 dumps).
std::vector<float> ReadF32(const std::string& path);

}  // namespace crema::testing

// Skips (or, when ReferenceRequired(), fails) the calling test -- or returns from the calling
// void helper -- saying that reference data is missing. A statement of its own (brace it after
// an `if`).
#define CREMA_MISSING_REFERENCE(relative)                                        \
  if (!::crema::testing::ReferenceRequired())                                    \
    GTEST_SKIP() << "reference data not found: " << (relative);                  \
  else                                                                           \
    GTEST_FAIL() << "reference data not found: " << (relative) << " (looked in " \
                 << ::crema::testing::ReferenceDirWanted()                       \
                 << "; CREMA_REQUIRE_REFERENCE=1 makes this a failure)"

#define CREMA_REQUIRE_REFERENCE(var, relative)                 \
  std::string var = ::crema::testing::ReferencePath(relative); \
  if (!var.empty()) {                                          \
  } else                                                       \
    CREMA_MISSING_REFERENCE(relative)
