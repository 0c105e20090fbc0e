// Crash safety of `crema train`: SIGKILL at random moments (seeded: CREMA_KILL_SEED, default
// fixed; each delay is printed so a failure can be replayed) while it snapshots every other
// iteration, for BINARYPROTO and HDF5 snapshots. After each kill every file under a final name
// must load and hold the weights of its iteration (regression_solver.hpp: plain SGD gives
// w_k = 2 - 2 (1 - lr)^k), the metrics lines must parse (the last may be cut short), and the next
// run resumes from the newest snapshot (and is killed in turn). A last `--resume` runs to the end:
// its loss and weights are those of an uninterrupted run, and the metrics file holds each
// iteration's record exactly once, in order.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto.hpp"
#include "crema/proto_io.hpp"
#include "image_tool_util.hpp"
#include "io/hdf5.hpp"
#include "io/json.hpp"
#include "regression_solver.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RegressionLoss;

// Small enough that w stays far from 2 (and each step far above float rounding) for the few
// thousand iterations a test reaches, so the weights tell their iteration.
constexpr double kLr = 1e-4;
constexpr int kTestInterval = 25;
constexpr int kKillsPerFormat = 10;

double Weight(int iter) { return 2 - 2 * std::pow(1 - kLr, iter); }
// The float rounding of each step adds up (a random walk, far below one step of the iteration).
double WeightTolerance(int iter) { return 1e-5 + 1e-9 * iter; }

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts `crema ARGS` with stdout and stderr to `log`; returns its pid.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  const std::string binary = std::string(CREMA_BINARY_DIR) + "/crema";
  std::fflush(nullptr);  // else the child writes the parent's buffered output again
  const pid_t pid = fork();
  if (pid == 0) {
    std::FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
    setenv("CREMA_OPENBLAS_FIX", "0", 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

class KillResumeTest : public testing::RegressionSolverTest {
 protected:
  // The iteration a snapshot file's weights belong to: N of reg_iter_N, or (for _best) the k
  // whose w_k they hold.
  int IterOfWeights(double w) const {
    const double k = std::log((2 - w) / 2) / std::log(1 - kLr);
    return static_cast<int>(std::lround(k));
  }

  // The ip weight stored in a .caffemodel or .caffemodel.h5.
  double LoadWeight(const std::string& path) {
    if (!net_) {
      NetParameter param;
      ParseTextProto(testing::RegressionNet(), "net", &param);
      NetOptions options;
      options.verbose = false;
      net_ = std::make_unique<Net>(param, options);
    }
    net_->CopyTrainedLayersFrom(path);  // throws on a truncated or corrupt file
    return net_->layer_by_name("ip")->blobs()[0]->data_at(0);
  }

  // The iteration recorded in a .solverstate or .solverstate.h5; its learned_net must exist and
  // hold that iteration's weights.
  int CheckState(const std::string& path) {
    int iter = -1;
    std::string learned_net;
    if (EndsWith(path, ".h5")) {
      Hdf5File file(path, Hdf5File::Mode::kRead);
      iter = ReadHdf5Int(file.id(), "iter");
      learned_net = ReadHdf5String(file.id(), "learned_net");
      Hdf5Handle history = OpenHdf5Group(file.id(), "history");
      EXPECT_EQ(Hdf5DatasetShape(history.get(), "0"), (std::vector<int>{1, 1})) << path;
    } else {
      SolverState state;
      ReadBinaryProto(path, &state);
      iter = state.iter();
      learned_net = state.learned_net();
      EXPECT_EQ(state.history_size(), 1) << path;
    }
    EXPECT_TRUE(fs::exists(learned_net)) << path << " names " << learned_net;
    if (fs::exists(learned_net)) {
      EXPECT_NEAR(LoadWeight(learned_net), Weight(iter), WeightTolerance(iter))
          << path << " and its " << learned_net << " are of different iterations";
    }
    return iter;
  }

  // Checks every file under a final name in the snapshot folder (those of _iter_ snapshots once
  // per version: a rename never changes a file); returns the newest iteration with a solver
  // state (-1 for none). The _best pair is of a test's iteration: a multiple of the interval, or
  // `final_iter` (the test at the end).
  int CheckSnapshots(const std::string& context, int final_iter = -1) {
    auto tested = [&](int iter) { return iter % kTestInterval == 0 || iter == final_iter; };
    SCOPED_TRACE(context);
    const std::regex iter_file(".*/reg_iter_(\\d+)\\.(caffemodel|solverstate)(\\.h5)?");
    int newest = -1;
    if (!fs::exists(dir_ + "/snap")) return newest;  // killed before the first snapshot
    for (const auto& entry : fs::directory_iterator(dir_ + "/snap")) {
      const std::string path = entry.path().string();
      const std::string name = entry.path().filename().string();
      std::smatch m;
      try {
        if (std::regex_match(path, m, iter_file)) {
          const int iter = std::stoi(m[1]);
          if (m[2] == "solverstate") newest = std::max(newest, iter);
          const auto version = std::make_pair(fs::last_write_time(path), fs::file_size(path));
          auto [seen, fresh] = checked_.emplace(path, version);
          if (!fresh && seen->second == version) continue;
          seen->second = version;
          if (m[2] == "caffemodel") {
            EXPECT_NEAR(LoadWeight(path), Weight(iter), WeightTolerance(iter)) << path;
          } else {
            EXPECT_EQ(CheckState(path), iter) << path;
          }
        } else if (name == "reg_best.caffemodel" || name == "reg_best.caffemodel.h5") {
          // The weights of the tested iteration nearest to where they lie.
          const double w = LoadWeight(path);
          int iter = IterOfWeights(w);
          iter = final_iter >= 0 && std::abs(iter - final_iter) <= kTestInterval / 2
                     ? final_iter
                     : static_cast<int>(std::lround(iter / double{kTestInterval})) * kTestInterval;
          EXPECT_NEAR(w, Weight(iter), WeightTolerance(iter)) << path;
        } else if (name == "reg_best.solverstate" || name == "reg_best.solverstate.h5") {
          EXPECT_TRUE(tested(CheckState(path))) << path;
        } else if (name == "reg_solver.prototxt") {
          SolverParameter param;
          ReadTextProto(path, &param);
        } else if (name == "reg_metrics.jsonl") {
          CheckMetricsLines(path, /*complete=*/false);
        } else {
          // Temporaries of interrupted writes and the TensorBoard folder only.
          EXPECT_TRUE(name.find(".tmp") != std::string::npos || name == "reg_tensorboard")
              << "unexpected file " << path;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << path << " does not load: " << e.what();
      }
    }
    return newest;
  }

  // Every line is a JSON object; only the last may be cut short (no newline) unless `complete`.
  std::vector<Json> CheckMetricsLines(const std::string& path, bool complete) {
    const std::string text = ReadAll(path);
    std::vector<Json> records;
    size_t start = 0;
    for (size_t end = text.find('\n'); end != std::string::npos;
         start = end + 1, end = text.find('\n', start)) {
      try {
        records.push_back(ParseJson(text.substr(start, end - start)));
      } catch (const std::exception& e) {
        ADD_FAILURE() << path << ": a bad line at offset " << start << ": " << e.what();
      }
    }
    if (complete) {
      EXPECT_EQ(start, text.size()) << path << " ends with a partial line";
    }
    return records;
  }

  std::vector<std::string> TrainArgs(const std::string& format, const std::string& max_iter) {
    return {"train",      "--solver",
            solver_,      "--resume",
            "--set",      "snapshot=2",
            "--set",      "snapshot_format=" + format,
            "--set",      StrCat("base_lr=", kLr),
            "--set",      StrCat("test_interval=", kTestInterval),
            "--set",      "max_iter=" + max_iter,
            "--progress", "off"};
  }

  void KillAndResume(const std::string& format) {
    // keep_best rewrites reg_best.* in place at each test (the loss falls at every one).
    std::ofstream(solver_, std::ios::app) << "keep_best { output: \"loss\" }\n";
    const char* env_seed = std::getenv("CREMA_KILL_SEED");
    const unsigned seed = env_seed ? static_cast<unsigned>(std::atol(env_seed)) : 20241124u;
    std::mt19937 rng(seed + (format == "HDF5"));
    std::uniform_int_distribution<int> delay_ms(50, 700);
    int killed = 0;
    for (int round = 0; round < kKillsPerFormat; ++round) {
      // Runs that would never end by themselves: each is killed, then the next resumes.
      const int delay = delay_ms(rng);
      const std::string context =
          StrCat(format, " kill ", round, " after ", delay, " ms (CREMA_KILL_SEED=", seed, ")");
      std::printf("%s\n", context.c_str());
      const std::string log = StrCat(dir_, "/run_", round, ".log");
      const pid_t pid = Spawn(TrainArgs(format, "100000000"), log);
      ASSERT_GT(pid, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      kill(pid, SIGKILL);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        ++killed;
      } else {
        ADD_FAILURE() << context << ": exited by itself (status " << status
                      << ") before the kill:\n"
                      << ReadAll(log);
      }
      CheckSnapshots(context);
    }
    EXPECT_EQ(killed, kKillsPerFormat);

    // The last run resumes from the newest snapshot and stops a few iterations later.
    const int newest = CheckSnapshots(format + " before the last run");
    const int max_iter = std::max(newest, 0) + 7;
    std::string args;
    for (const std::string& a : TrainArgs(format, std::to_string(max_iter))) args += " '" + a + "'";
    const auto r = testing::RunCrema(args.substr(1));
    ASSERT_EQ(r.rc, 0) << r.output;
    std::printf("%s: newest snapshot at iteration %d; resumed to %d\n", format.c_str(), newest,
                max_iter);
    if (newest > 0) {
      EXPECT_NE(r.output.find(StrCat("Resumed at iteration ", newest)), std::string::npos)
          << r.output;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("\nTest net #0: loss = (\\S+)")))
        << r.output;
    EXPECT_NEAR(std::stod(m[1]), RegressionLoss(kLr, max_iter),
                1e-4 * RegressionLoss(kLr, max_iter));
    const std::string ext = format == "HDF5" ? ".caffemodel.h5" : ".caffemodel";
    EXPECT_NEAR(LoadWeight(StrCat(prefix_, "_iter_", max_iter, ext)), Weight(max_iter),
                WeightTolerance(max_iter));
    CheckSnapshots(format + " at the end", max_iter);

    // The metrics: the train records of 0 .. max_iter-1 and the tests at each multiple of the
    // interval and at the end, once each, in order, with the losses of an uninterrupted run.
    const auto records = CheckMetricsLines(prefix_ + "_metrics.jsonl", /*complete=*/true);
    std::vector<int> train_iters, test_iters;
    for (const Json& record : records) {
      const int iter = static_cast<int>(record["iter"].number);
      if (record["phase"].string == "train") {
        train_iters.push_back(iter);
        EXPECT_NEAR(record["loss"].number, RegressionLoss(kLr, iter),
                    1e-4 * RegressionLoss(kLr, iter))
            << record.Dump();
      } else {
        test_iters.push_back(iter);
      }
    }
    std::vector<int> expected_train, expected_test;
    for (int i = 0; i < max_iter; ++i) expected_train.push_back(i);
    for (int i = 0; i <= max_iter; ++i)
      if (i % kTestInterval == 0 || i == max_iter) expected_test.push_back(i);
    EXPECT_EQ(train_iters, expected_train);
    EXPECT_EQ(test_iters, expected_test);
  }

  std::unique_ptr<Net> net_;
  std::map<std::string, std::pair<fs::file_time_type, uintmax_t>> checked_;
};

TEST_F(KillResumeTest, BinaryProtoSnapshots) { KillAndResume("BINARYPROTO"); }

TEST_F(KillResumeTest, Hdf5Snapshots) { KillAndResume("HDF5"); }

}  // namespace
}  // namespace crema
