// `crema train --nproc N` and `--gpu 0,1 | all` start the ranks themselves (tools/local_group.cpp):
// a TCP group on 127.0.0.1 that trains as one process with N times the batch (dist_train.hpp);
// a failing group exits non-zero without hanging (each run under `timeout`, whose 124 would fail
// the checks); flags that disagree are usage errors.
#include <cstdlib>
#include <string>

#include "crema/device.hpp"
#include "tools/dist_train.hpp"

namespace crema::dist_test {
namespace {

class LocalGroupTest : public DistTrainTest {
 protected:
  void SetUp() override { MakeData("local"); }

  // `crema train ARGS` under timeout, outside any group (no rank or MPI variables).
  int Train(const std::string& args, const std::string& log, const std::string& env = "") {
    const std::string command =
        "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE "
        "-u PMI_RANK CREMA_DIST_TIMEOUT=60 " +
        env + " timeout 120 " + CremaTrain(args, log);
    return ExitCode(std::system(command.c_str()));
  }
};

TEST_F(LocalGroupTest, NprocTwoEqualsOneProcessWithTwiceTheBatch) {
  constexpr int kIters = 7;
  const std::string single = Solver("single", 6, 1, kIters);
  const std::string multi = Solver("multi", 3, 1, kIters);
  ASSERT_EQ(Train("--solver " + single, "single.log"), 0) << Log("single.log");
  ASSERT_EQ(Train("--solver " + multi + " --nproc 2", "multi.log"), 0) << Log("multi.log");
  const std::string log = Log("multi.log");
  EXPECT_NE(log.find("Starting 2 training processes on this machine"), std::string::npos) << log;
  EXPECT_NE(log.find("TCP: 2 ranks; this is rank 0"), std::string::npos) << log;
  EXPECT_NE(log.find("2 ranks x batch 3 = global batch 6"), std::string::npos) << log;
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel",
                    dir_ + "/multi/snap_iter_7.caffemodel");
  ExpectMoved(dir_ + "/single/snap_iter_7.caffemodel");
}

TEST_F(LocalGroupTest, AFailingGroupExitsNonZero) {
  const std::string solver = Solver("bad", 3, 1, 50);
  BreakSource("bad");
  EXPECT_EQ(Train("--solver " + solver + " --nproc 2", "bad.log"), 1) << Log("bad.log");
  EXPECT_NE(Log("bad.log").find("no_such_db"), std::string::npos) << Log("bad.log");
}

TEST_F(LocalGroupTest, FlagsThatDisagreeAreUsageErrors) {
  const std::string solver = Solver("run", 3, 1, 2);
  EXPECT_EQ(Train("--solver " + solver + " --nproc 0", "zero.log"), 2) << Log("zero.log");
  EXPECT_NE(Log("zero.log").find("--nproc must be >= 1"), std::string::npos) << Log("zero.log");
  EXPECT_EQ(Train("--solver " + solver + " --nproc 3 --gpu 0,1", "disagree.log"), 2)
      << Log("disagree.log");
  EXPECT_NE(Log("disagree.log").find("disagree"), std::string::npos) << Log("disagree.log");
  EXPECT_EQ(Train("--solver " + solver + " --gpu 0,0", "twice.log"), 2) << Log("twice.log");
  EXPECT_NE(Log("twice.log").find("device 0 is listed twice"), std::string::npos)
      << Log("twice.log");
  // Under a launcher that started the ranks already.
  EXPECT_EQ(Train("--solver " + solver + " --nproc 2", "ranked.log", "RANK=0 WORLD_SIZE=3"), 2)
      << Log("ranked.log");
  EXPECT_NE(Log("ranked.log").find("do not use it under mpirun"), std::string::npos)
      << Log("ranked.log");
  // Other verbs take one GPU.
  const std::string command = std::string(CREMA_BINARY_DIR) + "/crema time --model " + dir_ +
                              "/run_net.prototxt --iterations 1 --gpu 0,1 > " + dir_ +
                              "/test.log 2>&1";
  EXPECT_EQ(ExitCode(std::system(command.c_str())), 2) << Log("test.log");
  EXPECT_NE(Log("test.log").find("only `crema train` runs on several GPUs"), std::string::npos)
      << Log("test.log");
}

TEST_F(LocalGroupTest, GpusThatAreNotThereAreNamed) {
  if (CudaDeviceCount() >= 8) GTEST_SKIP() << "8 or more CUDA devices";
  const std::string solver = Solver("run", 3, 1, 2);
  EXPECT_EQ(Train("--solver " + solver + " --gpu 0,7", "missing.log"), 1) << Log("missing.log");
  EXPECT_NE(Log("missing.log").find("--gpu 0,7: there is no CUDA device"), std::string::npos)
      << Log("missing.log");
}

TEST_F(LocalGroupTest, TwoGpusEqualOneGpuWithTwiceTheBatch) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices";
  const std::string single = Solver("single", 6, 1, 7);
  const std::string multi = Solver("multi", 3, 1, 7);
  ASSERT_EQ(Train("--solver " + single + " --gpu 0", "single.log"), 0) << Log("single.log");
  ASSERT_EQ(Train("--solver " + multi + " --gpu 0,1", "multi.log"), 0) << Log("multi.log");
  const std::string log = Log("multi.log");
  EXPECT_NE(log.find("one per GPU of --gpu 0,1"), std::string::npos) << log;
#ifdef CREMA_WITH_NCCL
  EXPECT_NE(log.find("Gradients averaged with NCCL"), std::string::npos) << log;
#endif
  // GPU sums run in another order for batch 3 + 3 than for 6.
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel", dir_ + "/multi/snap_iter_7.caffemodel",
                    1e-4);
}

}  // namespace
}  // namespace crema::dist_test
