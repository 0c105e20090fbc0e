// The solver's watching and steering features on a tiny net: the metrics file and TensorBoard
// events, early stopping, keep-best, reduce-lr-on-plateau (and its state across a snapshot),
// snapshot_keep, and the stop on a non-finite loss.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "solvers/datum_db.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

// y = W x on constant data, Euclidean loss against constant targets; `lr_mult` 0 freezes W, so
// the test loss stays flat (a plateau).
std::string Net(double lr_mult, double value = 1) {
  return StrCat(R"(
    net_param {
      name: "tiny"
      layer { name: "x" type: "DummyData" top: "x" top: "t"
              dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }
                                 data_filler { type: "constant" value: )",
                value, R"( } data_filler { type: "constant" value: 0.5 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
              param { lr_mult: )",
                lr_mult, R"( }
              inner_product_param { num_output: 2 bias_term: false
                                    weight_filler { type: "constant" value: )",
                value, R"( } } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
    }
    test_iter: 1 test_interval: 2 base_lr: 0.01 lr_policy: "fixed" display: 0
    random_seed: 3 )");
}

std::unique_ptr<Solver> MakeSolver(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return Solver::Create(param);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int Count(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const auto& line : lines) n += line.find(needle) != std::string::npos;
  return n;
}

// A test net output whose size changes between batches (Filter's kept items) has no mean: it
// gets no score (it was once summed past the end of the scores when it grew), the others do.
TEST(SolverCallbacks, TestOutputsThatChangeSizeGetNoScore) {
  const int labels[8] = {0, 0, 0, 1, 1, 0, 1, 1};  // batch 0 keeps 1 item, batch 1 keeps 3
  const std::string db = testing_db::WriteDatumDb(
      "varying_lmdb", 8, 1, 1, 1, [](int i, int) { return static_cast<uint8_t>(i); },
      [&](int i) { return labels[i]; });
  std::string text = Net(1);
  text = text.substr(0, text.find("test_iter:"));
  text.replace(text.find("net_param"), 9, "train_net_param");
  text += StrCat(R"(
    test_net_param {
      name: "varying"
      layer { name: "data" type: "Data" top: "data" top: "label"
              data_param { source: ")",
                 db, R"(" batch_size: 4 backend: LMDB } }
      layer { name: "filter" type: "Filter" bottom: "data" bottom: "label" top: "kept" }
      layer { name: "total" type: "Reduction" bottom: "data" top: "total" }
    }
    test_iter: 2 test_interval: 2 base_lr: 0.01 lr_policy: "fixed" display: 0 max_iter: 1)");
  auto solver = MakeSolver(text);
  const auto scores = solver->TestAll();
  ASSERT_EQ(scores.size(), 1u);
  ASSERT_EQ(scores[0].size(), 1u) << ::testing::PrintToString(scores[0]);
  EXPECT_EQ(scores[0][0].first, "total");
  EXPECT_DOUBLE_EQ(scores[0][0].second, (6 + 22) / 2.0);
}

// Settings that are legal but almost certainly a mistake are logged as warnings when the solver
// is built (crema validate reports them too).
TEST(SolverCallbacks, NegativeBaseLrAndNoIterationsWarn) {
  std::string text = Net(1);
  text.replace(text.find("base_lr: 0.01"), 13, "base_lr: -0.01");
  ::testing::internal::CaptureStderr();
  MakeSolver(text + " max_iter: 0");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("solver: base_lr is -0.01: a negative learning rate climbs the loss"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("solver: max_iter is 0: no training iteration will run"), std::string::npos)
      << log;
  ::testing::internal::CaptureStderr();
  MakeSolver(Net(1) + " max_iter: 5");
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("base_lr is"), std::string::npos) << log;
  EXPECT_EQ(log.find("max_iter is"), std::string::npos) << log;
}

TEST(SolverCallbacks, MetricsFileAndTensorBoardEvents) {
  const std::string dir = testing::TempDir();
  auto solver = MakeSolver(Net(1) + "max_iter: 6 snapshot: 3 snapshot_prefix: \"" + dir + "/m\"");
  solver->Solve();
  const std::vector<std::string> lines = Lines(dir + "/m_metrics.jsonl");
  EXPECT_EQ(Count(lines, "\"phase\": \"train\""), 6);
  EXPECT_EQ(Count(lines, "\"phase\": \"test\""), 4);  // iterations 0, 2, 4 and 6
  for (int iter = 0; iter < 6; ++iter)
    EXPECT_EQ(Count(lines, StrCat("{\"iter\": ", iter, ", \"phase\": \"train\"")), 1) << iter;
  EXPECT_NE(lines[1].find("\"lr\": 0.01"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("\"outputs\": {\"loss\": "), std::string::npos) << lines[1];
  int event_files = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/m_tensorboard"))
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_EQ(event_files, 1);

  // Resuming from iteration 3 replaces the records after it instead of duplicating them.
  auto resumed = MakeSolver(Net(1) + "max_iter: 6 snapshot: 3 snapshot_prefix: \"" + dir + "/m\"");
  resumed->Restore(dir + "/m_iter_3.solverstate");
  resumed->Solve();
  const std::vector<std::string> again = Lines(dir + "/m_metrics.jsonl");
  for (int iter = 0; iter < 6; ++iter)
    EXPECT_EQ(Count(again, StrCat("{\"iter\": ", iter, ", \"phase\": \"train\"")), 1) << iter;
}

TEST(SolverCallbacks, LogsCanBeTurnedOff) {
  const std::string dir = testing::TempDir();
  auto solver = MakeSolver(Net(1) + "max_iter: 2 snapshot_prefix: \"" + dir +
                           "/m\" metrics_log: false tensorboard: false");
  solver->Solve();
  EXPECT_FALSE(fs::exists(dir + "/m_metrics.jsonl"));
  EXPECT_FALSE(fs::exists(dir + "/m_tensorboard"));
}

TEST(SolverCallbacks, EarlyStoppingOnAPlateau) {
  // Frozen weights: the test loss is the same at every test, so after the first test (the best)
  // two more without improvement stop training at iteration 4 of 20.
  const std::string dir = testing::TempDir();
  auto solver = MakeSolver(Net(0) + "max_iter: 20 snapshot_prefix: \"" + dir +
                           "/e\" early_stopping { patience: 2 }");
  solver->Solve();
  EXPECT_EQ(solver->iter(), 4);
  EXPECT_TRUE(fs::exists(dir + "/e_iter_4.caffemodel"));  // the final snapshot is still written

  // While the loss keeps falling, training runs to max_iter.
  auto learning = MakeSolver(Net(1) + "max_iter: 12 snapshot_prefix: \"" + dir +
                             "/l\" early_stopping { patience: 2 }");
  learning->Solve();
  EXPECT_EQ(learning->iter(), 12);
}

TEST(SolverCallbacks, KeepBestSnapshotsTheBestTest) {
  const std::string dir = testing::TempDir();
  auto frozen = MakeSolver(Net(0) + "max_iter: 6 snapshot_prefix: \"" + dir + "/f\" keep_best { }");
  frozen->Solve();
  SolverState state;
  ReadBinaryProto(dir + "/f_best.solverstate", &state);
  EXPECT_EQ(state.iter(), 0);  // never improved on the first test
  EXPECT_EQ(state.learned_net(), dir + "/f_best.caffemodel");

  auto learning =
      MakeSolver(Net(1) + "max_iter: 6 snapshot_prefix: \"" + dir + "/b\" keep_best { }");
  learning->Solve();
  ReadBinaryProto(dir + "/b_best.solverstate", &state);
  EXPECT_EQ(state.iter(), 6);  // the loss fell at every test
  EXPECT_NEAR(state.callback_state().keep_best().best(), learning->last_test_scores()[0][0].second,
              1e-6);
}

TEST(SolverCallbacks, ReduceLrOnPlateauAndItsStateInSnapshots) {
  const std::string dir = testing::TempDir();
  const std::string text = Net(0) + "max_iter: 5 snapshot: 5 snapshot_prefix: \"" + dir +
                           "/r\" reduce_lr_on_plateau { patience: 1 factor: 0.5 min_lr: 0.002 }";
  auto solver = MakeSolver(text);
  EXPECT_NEAR(solver->GetLearningRate(), 0.01, 1e-9);
  solver->Step(5);  // tests at 0 (best), 2 and 4 (no improvement): two reductions
  EXPECT_NEAR(solver->GetLearningRate(), 0.0025, 1e-9);
  solver->Snapshot();
  solver->Step(2);  // a third reduction would give 0.00125: floored at min_lr
  EXPECT_NEAR(solver->GetLearningRate(), 0.002, 1e-9);

  auto resumed = MakeSolver(text);
  resumed->Restore(dir + "/r_iter_5.solverstate");
  EXPECT_NEAR(resumed->GetLearningRate(), 0.0025, 1e-9);
}

TEST(SolverCallbacks, SnapshotKeepDeletesOlderSnapshots) {
  const std::string dir = testing::TempDir();
  auto solver = MakeSolver(Net(1) + "max_iter: 5 snapshot: 1 snapshot_keep: 2 snapshot_prefix: \"" +
                           dir + "/k\"");
  solver->Solve();
  for (int iter = 1; iter <= 5; ++iter) {
    const bool kept = iter >= 4;
    EXPECT_EQ(fs::exists(StrCat(dir, "/k_iter_", iter, ".caffemodel")), kept) << iter;
    EXPECT_EQ(fs::exists(StrCat(dir, "/k_iter_", iter, ".solverstate")), kept) << iter;
  }
}

TEST(SolverCallbacks, StopsOnANonFiniteLoss) {
  auto solver = MakeSolver(Net(1, 1e30) + "max_iter: 3");
  try {
    solver->Step(3);
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("at iteration 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(solver->iter(), 0);
  auto lenient = MakeSolver(Net(1, 1e30) + "max_iter: 3 stop_on_nonfinite_loss: false");
  lenient->Step(3);
  EXPECT_EQ(lenient->iter(), 3);
}

TEST(SolverCallbacks, BadMonitorsAreConfigErrors) {
  EXPECT_THROW(MakeSolver(Net(1) + "max_iter: 1 early_stopping { output: \"acc\" }"), ConfigError);
  EXPECT_THROW(MakeSolver(Net(1) + "max_iter: 1 keep_best { test_net: 1 }"), ConfigError);
  EXPECT_THROW(MakeSolver(Net(1) + "max_iter: 1 reduce_lr_on_plateau { factor: 2 }"), ConfigError);
  EXPECT_THROW(MakeSolver(Net(1) + "max_iter: 1 snapshot_keep: -1"), ConfigError);
}

}  // namespace
}  // namespace crema
