// crema sweep: trains every combination of a grid of --set overrides, each as a child
// `crema train` process in its own folder, then ranks the runs by a final test output.
#include <fcntl.h>
#include <glog/logging.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "overrides.hpp"
#include "verb.hpp"

DEFINE_string(grid, "",
              "A field and the values to try, FIELD=V1,V2,... (any --set FIELD, net.LAYER.PATH "
              "too); repeat the flag for more fields: every combination is run. Separate the "
              "values with | instead when a value holds commas (stepvalue=100,200|300,400).");
DEFINE_int32(parallel, 1,
             "How many runs train at once; the CPU threads (OMP_NUM_THREADS, or all cores) are "
             "split between them.");
DEFINE_string(metric, "",
              "The final test output to rank the runs by (NAME, or NAME#I for test net I); "
              "default: the first test output.");
DEFINE_string(metric_mode, "",
              "max (higher is better) or min; default: min for names containing \"loss\" or "
              "\"error\", max otherwise (accuracy, ...).");
DECLARE_string(plugin);

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t got_sigint = 0;
void HandleSigint(int) { got_sigint = 1; }

struct GridField {
  std::string path;
  std::vector<std::string> values;
};

struct Run {
  std::vector<std::string> values;  // one per grid field
  std::string dir, log;
  pid_t pid = -1;
  int exit_code = -1;                                  // -1: not run
  std::vector<std::pair<std::string, double>> scores;  // final test outputs, in order
};

std::vector<GridField> ParseGrid(const std::vector<std::string>& items) {
  std::vector<GridField> grid;
  for (const Override& o : ParseOverrides(items, "--grid")) {
    const char separator = o.value.find('|') != std::string::npos ? '|' : ',';
    GridField field{o.path, SplitList(o.value, separator)};
    if (field.values.empty()) CREMA_THROW_CONFIG("--grid ", o.text(), ": no values");
    for (const GridField& other : grid)
      if (other.path == field.path) CREMA_THROW_CONFIG("--grid ", o.path, " is given twice");
    grid.push_back(field);
  }
  return grid;
}

// Applies the --set and one value of every grid field to a copy of the solver, so a bad field or
// value is an error before anything runs.
void CheckOverrides(const SolverParameter& solver, const std::vector<Override>& base,
                    const std::vector<GridField>& grid) {
  const int saved = FLAGS_minloglevel;
  FLAGS_minloglevel = google::GLOG_WARNING;  // no notices for these trial applications
  try {
    for (const GridField& field : grid) {
      for (const std::string& value : field.values) {
        std::vector<Override> overrides = base;
        overrides.push_back({field.path, value});
        SolverParameter copy = solver;
        ApplySolverOverrides(overrides, &copy);
        ApplyNetOverrides(overrides, "", &copy);
      }
    }
  } catch (const ConfigError& e) {
    FLAGS_minloglevel = saved;
    CREMA_THROW_CONFIG("in --grid or --set: ", e.what());
  } catch (...) {
    FLAGS_minloglevel = saved;
    throw;
  }
  FLAGS_minloglevel = saved;
}

std::string SafeName(const std::string& text) {
  std::string name;
  for (char c : text)
    name +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '=' || c == '_'
            ? c
            : '-';
  return name;
}

std::string RunName(int index, const std::vector<GridField>& grid,
                    const std::vector<std::string>& values) {
  char number[16];
  std::snprintf(number, sizeof(number), "%03d", index);
  std::string name = number;
  for (size_t i = 0; i < grid.size(); ++i) {
    const std::string& path = grid[i].path;
    name += "_" + SafeName(path.substr(path.rfind('.') + 1) + "=" + values[i]);
  }
  return name.substr(0, 120);
}

// Starts `crema train` for `run` with stdout and stderr in run->log.
void Launch(const std::vector<std::string>& args, int threads, Run* run) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string thread_text = std::to_string(threads);
  const pid_t pid = fork();
  if (pid < 0) CREMA_THROW_RUNTIME("cannot start a run: ", std::strerror(errno));
  if (pid == 0) {
    const int fd = ::open(run->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("OMP_NUM_THREADS", thread_text.c_str(), 1);
    setenv("OPENBLAS_NUM_THREADS", thread_text.c_str(), 1);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  run->pid = pid;
}

// The "Test net #I: NAME = VALUE" lines `crema train` prints at the end.
void ReadScores(Run* run) {
  std::ifstream in(run->log);
  static const std::regex line_re(R"(^Test net #([0-9]+): (.+) = (\S+)$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, m, line_re)) continue;
    const std::string name = m[1] == "0" ? m[2].str() : m[2].str() + "#" + m[1].str();
    run->scores.emplace_back(name, std::strtod(m[3].str().c_str(), nullptr));
  }
}

const double* Score(const Run& run, const std::string& name) {
  for (const auto& s : run.scores)
    if (s.first == name) return &s.second;
  return nullptr;
}

std::string Status(const Run& run) {
  if (run.exit_code == -1) return "not run";
  if (run.exit_code != 0) return StrCat("failed (exit ", run.exit_code, ", see ", run.log, ")");
  return "ok";
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

int RunSweep(const std::vector<std::string>& args) {
  if (!args.empty()) CREMA_THROW_CONFIG("unexpected argument \"", args[0], "\"");
  RequireFlag("solver", FLAGS_solver);
  RequireFlag("grid", FLAGS_grid);
  if (FLAGS_parallel < 1) CREMA_THROW_CONFIG("--parallel must be >= 1, got ", FLAGS_parallel);
  if (!FLAGS_metric_mode.empty() && FLAGS_metric_mode != "max" && FLAGS_metric_mode != "min")
    CREMA_THROW_CONFIG("--metric_mode must be max or min, got \"", FLAGS_metric_mode, "\"");
  SolverParameter solver;
  ReadSolverParamsFromTextFile(FLAGS_solver, &solver);
  const std::vector<std::string> base_sets = RepeatedFlagValues(FLAGS_set);
  const std::vector<Override> base = ParseOverrides(base_sets, "--set");
  const std::vector<GridField> grid = ParseGrid(RepeatedFlagValues(FLAGS_grid));
  CheckOverrides(solver, base, grid);
  ApplySolverOverrides(base, &solver);  // a --set snapshot_prefix moves the sweep folder too

  const fs::path prefix = solver.snapshot_prefix();
  const std::string out = !FLAGS_out.empty()         ? FLAGS_out
                          : prefix.has_parent_path() ? (prefix.parent_path() / "sweep").string()
                                                     : "sweep";
  const std::string stem = prefix.has_filename() ? prefix.filename().string() : "snapshot";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) CREMA_THROW_RUNTIME("cannot create ", out, ": ", ec.message());

  // Every combination, the last field varying fastest.
  std::vector<Run> runs(1);
  for (const GridField& field : grid) {
    std::vector<Run> next;
    for (const Run& r : runs) {
      for (const std::string& v : field.values) {
        next.push_back(r);
        next.back().values.push_back(v);
      }
    }
    runs.swap(next);
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int cores = omp != nullptr && std::atoi(omp) > 0
                        ? std::atoi(omp)
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / FLAGS_parallel);
  std::printf("sweep: %zu runs in %s, %d at a time, %d thread(s) each\n", runs.size(), out.c_str(),
              FLAGS_parallel, threads);
  std::fflush(stdout);

  struct sigaction action = {}, old_action = {};
  action.sa_handler = &HandleSigint;
  sigaction(SIGINT, &action, &old_action);
  got_sigint = 0;
  size_t next = 0;
  int running = 0;
  while (running > 0 || (next < runs.size() && !got_sigint)) {
    while (running < FLAGS_parallel && next < runs.size() && !got_sigint) {
      Run& run = runs[next];
      run.dir = (fs::path(out) / RunName(static_cast<int>(next), grid, run.values)).string();
      run.log = run.dir + "/train.log";
      fs::create_directories(run.dir, ec);
      std::vector<std::string> argv = {"crema", "train", "--solver", FLAGS_solver};
      if (!FLAGS_gpu.empty()) argv.insert(argv.end(), {"--gpu", FLAGS_gpu});
      if (!FLAGS_plugin.empty()) argv.insert(argv.end(), {"--plugin", FLAGS_plugin});
      for (const std::string& s : base_sets) argv.insert(argv.end(), {"--set", s});
      for (size_t i = 0; i < grid.size(); ++i)
        argv.insert(argv.end(), {"--set", grid[i].path + "=" + run.values[i]});
      argv.insert(argv.end(), {"--set", "snapshot_prefix=" + run.dir + "/" + stem});
      Launch(argv, threads, &run);
      std::printf("sweep: started %s\n", run.dir.c_str());
      std::fflush(stdout);
      ++next;
      ++running;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (Run& run : runs) {
      if (run.pid != pid) continue;
      run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      ReadScores(&run);
      std::printf("sweep: %s %s\n", run.dir.c_str(), Status(run).c_str());
      std::fflush(stdout);
      --running;
    }
  }
  sigaction(SIGINT, &old_action, nullptr);

  // The metric and its direction; then the table, ranked.
  std::vector<std::string> names;  // every test output seen, in order
  for (const Run& run : runs)
    for (const auto& s : run.scores)
      if (std::find(names.begin(), names.end(), s.first) == names.end()) names.push_back(s.first);
  const std::string metric = !FLAGS_metric.empty() ? FLAGS_metric : names.empty() ? "" : names[0];
  std::string lower = metric;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool maximize = !FLAGS_metric_mode.empty() ? FLAGS_metric_mode == "max"
                                                   : lower.find("loss") == std::string::npos &&
                                                         lower.find("error") == std::string::npos;
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double* x = Score(runs[a], metric);
    const double* y = Score(runs[b], metric);
    if (x == nullptr || y == nullptr) return x != nullptr && y == nullptr;
    return maximize ? *x > *y : *x < *y;
  });

  std::vector<std::string> header = {"rank", "run"};
  for (const GridField& field : grid) header.push_back(field.path);
  header.insert(header.end(), names.begin(), names.end());
  header.push_back("status");
  std::vector<std::vector<std::string>> rows;
  int rank = 0;
  for (size_t i : order) {
    const Run& run = runs[i];
    std::vector<std::string> row = {Score(run, metric) ? std::to_string(++rank) : "-",
                                    fs::path(run.dir).filename().string()};
    row.insert(row.end(), run.values.begin(), run.values.end());
    for (const std::string& name : names) {
      const double* score = Score(run, name);
      row.push_back(score ? Number(*score) : "");
    }
    row.push_back(Status(run) == "ok" && !Score(run, metric) && !metric.empty() ? "no " + metric
                                                                                : Status(run));
    rows.push_back(row);
  }
  std::ostringstream tsv, md;
  auto join = [](const std::vector<std::string>& cells, const std::string& sep) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) line += (i ? sep : "") + cells[i];
    return line;
  };
  tsv << join(header, "\t") << "\n";
  for (const auto& row : rows) tsv << join(row, "\t") << "\n";
  md << (metric.empty()
             ? std::string("no test outputs to rank by (the solver has no test net?)")
             : "ranked by " + metric + " (" + (maximize ? "higher" : "lower") + " is better)")
     << "\n\n| " << join(header, " | ") << " |\n|";
  for (size_t i = 0; i < header.size(); ++i) md << " --- |";
  md << "\n";
  for (const auto& row : rows) md << "| " << join(row, " | ") << " |\n";
  WriteFileAtomically(out + "/results.tsv", tsv.str());
  WriteFileAtomically(out + "/results.md", md.str());
  std::printf("\n%s\nwritten to %s/results.tsv and %s/results.md\n", md.str().c_str(), out.c_str(),
              out.c_str());
  const bool any_ok =
      std::any_of(runs.begin(), runs.end(), [](const Run& run) { return run.exit_code == 0; });
  return any_ok ? 0 : 1;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    sweep, "sweep", "train a grid of solver/net settings and rank the runs",
    "crema sweep --solver SOLVER.prototxt --grid FIELD=V1,V2 [--grid FIELD2=...] [--set F=V] "
    "[--parallel N] [--metric NAME] [--metric_mode max|min] [--out DIR] [--gpu ID]\n\n"
    "Runs `crema train --solver SOLVER --set ...` once per combination of the --grid values "
    "(FIELD as in `crema train --set`, net.LAYER.PATH included), N at a time with the CPU "
    "threads split between them. Each run has its own folder DIR/NNN_FIELD=VALUE_... holding "
    "its snapshots (snapshot_prefix is redirected there), its effective solver and train.log. "
    "A failed run is reported in the table and does not stop the others; Ctrl-C stops the "
    "running ones (they write their final snapshot) and starts no more. At the end a table of "
    "the grid values and each run's final test outputs, ranked by --metric, is printed and "
    "written to DIR/results.tsv and DIR/results.md. Exit code 0 when at least one run "
    "succeeded.",
    {"solver", "grid", "set", "parallel", "metric", "metric_mode", "out", "gpu"},
    &crema::cli::RunSweep);
