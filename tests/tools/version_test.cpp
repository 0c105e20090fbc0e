// `crema --version`: the version, the commit the build came from, and one line for each optional
// library saying the version built against or "not built", in agreement with how this build was
// configured.
#include "crema/version.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "support/run_command.hpp"

namespace crema {
namespace {

using Result = testing::CommandResult;

// The text after "NAME: " on its own line of `output` ("" when there is no such line).
std::string Line(const std::string& output, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("(^|\n)" + name + ": ([^\n]*)"))) return "";
  return m[2];
}

TEST(VersionTest, VersionAndCommit) {
  const Result r = testing::RunCrema("--version");
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string first = r.output.substr(0, r.output.find('\n'));
  EXPECT_EQ(first, std::string("crema ") + VersionString() + " (git " + GitCommit() + ")");
  EXPECT_EQ(std::string(VersionString()), std::to_string(kVersionMajor) + "." +
                                              std::to_string(kVersionMinor) + "." +
                                              std::to_string(kVersionPatch));
  // Built from a git checkout: its commit, perhaps "-dirty" (a tarball says "unknown").
  const Result head = testing::RunCommand("git -C '" + std::string(CREMA_SOURCE_DIR) +
                                          "' rev-parse --short=12 HEAD");
  if (head.rc == 0) {
    EXPECT_EQ(std::string(GitCommit()).substr(0, 12), head.output.substr(0, 12));
  }
  EXPECT_EQ(r.output, testing::RunCrema("version").output);
}

TEST(VersionTest, LibrariesFoundOrNotBuilt) {
  const Result r = testing::RunCrema("--version");
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::regex found_or_not("yes, [0-9]+\\.[0-9]+\\.[0-9]+.*|not built");
  for (const char* name : {"CUDA", "cuDNN", "NCCL", "oneDNN"})
    EXPECT_TRUE(std::regex_match(Line(r.output, name), found_or_not)) << name << "\n" << r.output;
  for (const char* name : {"MPI", "OpenCV", "LevelDB"})
    EXPECT_TRUE(std::regex_match(Line(r.output, name), std::regex("yes|not built"))) << name << "\n"
                                                                                     << r.output;
#ifdef CREMA_WITH_CUDA
  EXPECT_EQ(Line(r.output, "CUDA").rfind("yes, ", 0), 0u) << r.output;
  EXPECT_EQ(Line(r.output, "cuDNN").rfind("yes, 9.", 0), 0u) << r.output;
#else
  EXPECT_EQ(Line(r.output, "CUDA"), "not built") << r.output;
#endif
#ifdef CREMA_WITH_OPENCV
  EXPECT_EQ(Line(r.output, "OpenCV"), "yes") << r.output;
#else
  EXPECT_EQ(Line(r.output, "OpenCV"), "not built") << r.output;
#endif
}

}  // namespace
}  // namespace crema
