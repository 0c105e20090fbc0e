// `mpirun -np 2 crema train` (data-parallel over MPI, solvers/distributed.hpp) against a single
// process with twice the batch: a Data layer over an LMDB, no random transforms; rank r reads the
// records i with i % 2 == r, so the two ranks' batches of B together are the single run's batch
// of 2B, and with SoftmaxWithLoss's VALID normalization the averaged gradient is that batch's
// gradient. The weights after K iterations must agree within 1e-5 (relative). Skips without MPI
// in the build or without mpirun on PATH.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/dist_train.hpp"

namespace crema::dist_test {
namespace {

std::string Mpirun() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && fs::exists(fs::path(dir) / "mpirun")) return (fs::path(dir) / "mpirun");
  return "";
}

class MpiTrainTest : public DistTrainTest {
 protected:
  void SetUp() override {
#ifndef CREMA_WITH_MPI
    GTEST_SKIP() << "crema was built without MPI (CREMA_MPI)";
#endif
    mpirun_ = Mpirun();
    if (mpirun_.empty()) GTEST_SKIP() << "mpirun is not on PATH";
    MakeData("mpi");
  }

  // Runs `args` after crema (under mpirun -np 2 when `ranks` is 2); returns the exit status.
  // `wrapper` (e.g. "timeout 120 ") goes before mpirun.
  int Train(int ranks, const std::string& args, const std::string& log,
            const std::string& wrapper = "") {
    std::string command = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ";
    if (ranks > 1)
      command +=
          "OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo "
          "OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_plm_rsh_agent=false " +
          wrapper + mpirun_ + " --allow-run-as-root --oversubscribe --bind-to none -np " +
          std::to_string(ranks) + " ";
    return ExitCode(std::system((command + CremaTrain(args, log)).c_str()));
  }

  std::string mpirun_;
};

TEST_F(MpiTrainTest, TwoRanksEqualOneProcessWithTwiceTheBatch) {
  constexpr int kIters = 7;
  const std::string single = Solver("single", 6, 1, kIters);
  const std::string multi = Solver("multi", 3, 1, kIters);
  ASSERT_EQ(Train(1, "--solver " + single, "single.log"), 0) << Log("single.log");
  ASSERT_EQ(Train(2, "--solver " + multi, "multi.log"), 0) << Log("multi.log");
  const std::string log = Log("multi.log");
  EXPECT_NE(log.find("2 ranks x batch 3 = global batch 6"), std::string::npos) << log;
  EXPECT_NE(log.find("Data layer \"data\" is sharded by rank"), std::string::npos) << log;
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel",
                    dir_ + "/multi/snap_iter_7.caffemodel");
  ExpectMoved(dir_ + "/single/snap_iter_7.caffemodel");
  // Only rank 0 logs metrics: one line per iteration, not one per rank.
  std::ifstream metrics(dir_ + "/multi/snap_metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);)
    if (line.find("\"phase\": \"train\"") != std::string::npos) ++lines;
  EXPECT_EQ(lines, kIters);
}

TEST_F(MpiTrainTest, IterSizeAndScaledLearningRate) {
  // 2 ranks x batch 2 x iter_size 2 with base_lr 0.25 scaled by 2 = batch 4 x iter_size 2, 0.5.
  const std::string single = Solver("single", 4, 2, 5);
  const std::string multi = Solver("multi", 2, 2, 5);
  ASSERT_EQ(Train(1, "--solver " + single, "single.log"), 0) << Log("single.log");
  ASSERT_EQ(Train(2, "--solver " + multi + " --set base_lr=0.25 --scale_lr_by_world", "multi.log"),
            0)
      << Log("multi.log");
  EXPECT_NE(Log("multi.log").find("2 ranks x batch 2 (x iter_size 2) = global batch 8"),
            std::string::npos)
      << Log("multi.log");
  ExpectSameWeights(dir_ + "/single/snap_iter_5.caffemodel",
                    dir_ + "/multi/snap_iter_5.caffemodel");
}

TEST_F(MpiTrainTest, ResumeUnderMpirunContinuesTheRun) {
  // 4 iterations, a snapshot, then a resume to 9 under mpirun = 9 iterations in one process.
  const std::string single = Solver("single", 6, 1, 9);
  const std::string multi = Solver("multi", 3, 1, 4, "snapshot: 4\n");
  ASSERT_EQ(Train(1, "--solver " + single, "single.log"), 0) << Log("single.log");
  ASSERT_EQ(Train(2, "--solver " + multi, "first.log"), 0) << Log("first.log");
  ASSERT_TRUE(fs::exists(dir_ + "/multi/snap_iter_4.solverstate"));
  ASSERT_EQ(Train(2,
                  "--solver " + multi + " --snapshot " + dir_ +
                      "/multi/snap_iter_4.solverstate --set max_iter=9",
                  "resume.log"),
            0)
      << Log("resume.log");
  ExpectSameWeights(dir_ + "/single/snap_iter_9.caffemodel",
                    dir_ + "/multi/snap_iter_9.caffemodel");
}

TEST_F(MpiTrainTest, EarlyStoppingOnRankZeroStopsEveryRank) {
  // Only rank 0 tests; min_delta 100 makes the second test (iteration 2) stop the run. Without
  // the broadcast of that decision, rank 1 would go on to max_iter and wait forever for rank 0 in
  // the gradient allreduce (the command's timeout ends that case).
  const std::string solver =
      Solver("stop", 3, 1, 50,
             "test_net: \"" + dir_ +
                 "/stop_net.prototxt\" test_iter: 1 test_interval: 2\n"
                 "early_stopping { output: \"loss\" min_delta: 100 patience: 1 }\n");
  ASSERT_EQ(Train(2, "--solver " + solver, "stop.log", "timeout 120 "), 0) << Log("stop.log");
  EXPECT_NE(Log("stop.log").find("early_stopping: loss has not improved"), std::string::npos)
      << Log("stop.log");
  EXPECT_TRUE(fs::exists(dir_ + "/stop/snap_iter_2.caffemodel")) << Log("stop.log");
  EXPECT_FALSE(fs::exists(dir_ + "/stop/snap_iter_50.caffemodel"));
}

TEST_F(MpiTrainTest, AFailingRankEndsTheJob) {
  // A source that does not exist: every rank fails while building the net; the job must end
  // (MPI_Abort), not hang, with a non-zero status and the message.
  const std::string solver = Solver("bad", 3, 1, 3);
  BreakSource("bad");
  EXPECT_NE(Train(2, "--solver " + solver, "bad.log"), 0);
  EXPECT_NE(Log("bad.log").find("aborting all ranks"), std::string::npos) << Log("bad.log");
}

}  // namespace
}  // namespace crema::dist_test
