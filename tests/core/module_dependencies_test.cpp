// The module READMEs say which way src/core and src/math depend: core on nothing but the schema
// and the public headers, math on core (and never the reverse). This test reads their sources'
// #include lines so a new include that turns the arrow around fails here, naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace crema {
namespace {

namespace fs = std::filesystem;

// "file:line: #include "x/y.hpp"" for each quoted include of `module`'s sources whose first
// folder is not in `allowed`.
std::vector<std::string> ForeignIncludes(const std::string& module,
                                         const std::set<std::string>& allowed) {
  std::vector<std::string> found;
  const fs::path folder = fs::path(CREMA_SOURCE_DIR) / "src" / module;
  const std::regex include_line("^\\s*#\\s*include\\s+\"([^\"/]+)/[^\"]*\"");
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (std::regex_search(line, m, include_line) && !allowed.count(m[1]))
        found.push_back(entry.path().filename().string() + ":" + std::to_string(number) + ": " +
                        line);
    }
  }
  return found;
}

TEST(ModuleDependencies, CoreIncludesOnlyItselfAndThePublicHeaders) {
  const std::vector<std::string> found = ForeignIncludes("core", {"core", "crema"});
  EXPECT_TRUE(found.empty()) << "src/core must not include other modules:\n"
                             << ::testing::PrintToString(found);
}

TEST(ModuleDependencies, MathBuildsOnCoreOnly) {
  const std::vector<std::string> found = ForeignIncludes("math", {"core", "crema", "math"});
  EXPECT_TRUE(found.empty()) << "src/math may include src/core, not other modules:\n"
                             << ::testing::PrintToString(found);
}

}  // namespace
}  // namespace crema
