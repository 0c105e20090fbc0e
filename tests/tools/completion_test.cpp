// `crema completion bash`: the script lists every verb of `crema --help` and, for each, every flag
// of `crema VERB --help`, is valid bash, and completes verbs and flags when bash runs it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_command.hpp"

namespace crema {
namespace {

using Result = testing::CommandResult;

// The verbs `crema --help` lists (its "verbs:" block).
std::vector<std::string> HelpVerbs() {
  const Result help = testing::RunCrema("--help");
  std::vector<std::string> verbs;
  std::istringstream lines(help.output);
  std::string line;
  bool in_verbs = false;
  const std::regex verb_line("^  ([a-z0-9_-]+) .*");
  while (std::getline(lines, line)) {
    if (line == "verbs:") {
      in_verbs = true;
      continue;
    }
    if (in_verbs && line.empty()) break;
    std::smatch m;
    if (in_verbs && std::regex_match(line, m, verb_line)) verbs.push_back(m[1]);
  }
  return verbs;
}

// The flags `crema VERB --help` lists for the verb itself, dashed (--output-dir).
std::vector<std::string> HelpFlags(const std::string& verb) {
  const Result help = testing::RunCrema(verb + " --help");
  std::vector<std::string> flags;
  std::istringstream lines(help.output);
  std::string line;
  const std::regex flag_line("^  --([a-z0-9_]+) \\(.*");
  while (std::getline(lines, line)) {
    if (line == "flags of every verb:") break;
    std::smatch m;
    if (!std::regex_match(line, m, flag_line)) continue;
    std::string flag = m[1];
    for (char& c : flag) c = c == '_' ? '-' : c;
    flags.push_back("--" + flag);
  }
  return flags;
}

std::string Script() {
  const Result r = testing::RunCrema("completion bash");
  EXPECT_EQ(r.rc, 0) << r.output;
  return r.output;
}

// What bash's completion function offers for the words of `line` (completing the last word).
std::string Complete(const std::string& script_path, const std::string& line) {
  const std::string command = "bash -c 'source " + script_path + "; COMP_WORDS=(" + line +
                              "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _crema; "
                              "for w in \"${COMPREPLY[@]}\"; do echo \"$w\"; done'";
  return testing::RunCommand(command).output;
}

TEST(CompletionTest, EveryVerbAndItsFlags) {
  const std::string script = Script();
  const std::vector<std::string> verbs = HelpVerbs();
  ASSERT_GT(verbs.size(), 20u);
  for (const std::string& verb : verbs) {
    const std::string start = "\n    " + verb + ") flags=\"";
    const size_t at = script.find(start);
    ASSERT_NE(at, std::string::npos) << verb << " missing from the script";
    const size_t begin = at + start.size();
    const std::string flags = " " + script.substr(begin, script.find('"', begin) - begin) + " ";
    for (const std::string& flag : HelpFlags(verb))
      EXPECT_NE(flags.find(" " + flag + " "), std::string::npos)
          << verb << ": " << flag << " missing from:" << flags;
  }
}

TEST(CompletionTest, BashCompletesVerbsAndFlags) {
  const std::string path = ::testing::TempDir() + "/crema_completion.bash";
  std::ofstream(path) << Script();
  const Result syntax = testing::RunCommand("bash -n " + path);
  ASSERT_EQ(syntax.rc, 0) << syntax.output;
  EXPECT_EQ(Complete(path, "crema tr"), "train\n");
  EXPECT_EQ(Complete(path, "crema train --sol"), "--solver\n");
  EXPECT_EQ(Complete(path, "crema convert_mnist --back"), "--backend\n");  // Caffe's spelling
  EXPECT_NE(Complete(path, "crema test --cpu-e").find("--cpu-engine"), std::string::npos);
  EXPECT_EQ(Complete(path, "crema train --solver m"), "");  // values: bash completes file names
}

TEST(CompletionTest, OutWritesTheScript) {
  const std::string path = ::testing::TempDir() + "/crema_completion_out.bash";
  const Result r = testing::RunCrema("completion bash --out " + path);
  ASSERT_EQ(r.rc, 0) << r.output;
  std::ifstream in(path);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(written.str(), Script());
  const Result bad = testing::RunCrema("completion bash --out /nonexistent-folder/crema.bash");
  EXPECT_EQ(bad.rc, 1) << bad.output;
  EXPECT_NE(bad.output.find("/nonexistent-folder"), std::string::npos) << bad.output;
}

TEST(CompletionTest, OtherShellsAreAConfigError) {
  const Result r = testing::RunCrema("completion zsh");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("knows bash only"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crema
