// crema draw: renders a net prototxt with Graphviz (the DOT text from net/net_dot.hpp, laid out
// by `dot`). OUT's extension picks the format: .png, .svg, .pdf, or .dot (the DOT text itself,
// no Graphviz needed).
#include <gflags/gflags.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "net/net_dot.hpp"
#include "verb.hpp"

DEFINE_string(rankdir, "LR", "Graph direction for `crema draw`: LR, TB, BT or RL.");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// Runs dot -T<format> -o out dot_file; RuntimeError when it is missing or fails.
void RunDot(const std::string& format, const std::string& dot_file, const std::string& out) {
  const std::string dot = FindOnPath("dot");
  if (dot.empty())
    CREMA_THROW_RUNTIME(
        "Graphviz's `dot` was not found on PATH (Debian: apt-get install graphviz);"
        " `crema draw NET OUT.dot` writes the DOT text without it");
  const std::string type = "-T" + format;
  const pid_t pid = fork();
  if (pid < 0) CREMA_THROW_RUNTIME("cannot start ", dot);
  if (pid == 0) {
    execl(dot.c_str(), "dot", type.c_str(), "-o", out.c_str(), dot_file.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    CREMA_THROW_RUNTIME(dot, " failed to write ", out, " (exit status ",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1, ")");
}

int RunDraw(const std::vector<std::string>& args) {
  if (args.size() != 2) CREMA_THROW_CONFIG("usage: crema draw NET.prototxt OUT.png|svg|pdf|dot");
  const std::string& out = args[1];
  std::string format = fs::path(out).extension().string();
  if (!format.empty()) format = format.substr(1);
  if (format != "png" && format != "svg" && format != "pdf" && format != "dot")
    CREMA_THROW_CONFIG("crema draw: ", out, ": the output must end in .png, .svg, .pdf or .dot");
  NetParameter param;
  ReadNetParamsFromTextFile(args[0], &param);
  NetDotOptions options;
  options.rankdir = FLAGS_rankdir;
  if (!FLAGS_phase.empty()) {
    options.filter_phase = true;
    options.phase = PhaseFromFlag(TRAIN);
  }
  const std::string text = NetToDot(param, options);
  const std::string dot_file = format == "dot" ? out : out + ".dot.tmp";
  {
    std::ofstream file(dot_file);
    file << text;
    if (!file) CREMA_THROW_RUNTIME("cannot write ", dot_file);
  }
  if (format != "dot") {
    try {
      RunDot(format, dot_file, out);
    } catch (...) {
      fs::remove(dot_file);
      throw;
    }
    fs::remove(dot_file);
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

CREMA_REGISTER_VERB(draw, "draw", "render a net as a graph (png, svg, pdf or dot) with Graphviz",
                    "crema draw NET.prototxt OUT.png|svg|pdf|dot [--rankdir LR] [--phase TRAIN]",
                    {"rankdir", "phase"}, &RunDraw);

}  // namespace crema::cli
