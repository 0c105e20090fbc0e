// Two `crema train` processes started with torchrun-style variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port) and no MPI form a TCP group
// (solvers/tcp_transport.cpp) and train as one process with twice the batch (dist_train.hpp);
// overlapping the gradient buckets with backward changes no bit; a rank that fails or dies, a
// rank that never comes, another WORLD_SIZE and a port in use end the run with a message, not a
// hang (every process runs under `timeout`, whose 124 would fail the checks).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/device.hpp"
#include "io/hdf5.hpp"
#include "tools/dist_train.hpp"

namespace crema::dist_test {
namespace {

// A socket listening on 127.0.0.1:`port` (as another program would), or -1.
int ListenOn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const int one = 1;  // the port may be in TIME_WAIT from earlier runs
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The kernel's pick of a port nobody listens on now, for a socket bound to port 0.
int KernelPickedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// A port nobody listens on now, nor on the next one (which the ranks take under torchrun's agent
// store; another job on the machine may hold it).
int FreePort() {
  for (int attempt = 0;; ++attempt) {
    const int port = KernelPickedPort();
    const int next = port < 65535 ? ListenOn(port + 1) : -1;
    if (next >= 0) close(next);
    if (next >= 0 || attempt == 20) return port;
  }
}

class TcpTrainTest : public DistTrainTest {
 protected:
  void SetUp() override {
    MakeData("tcp");
    port_ = FreePort();
  }

  // The environment of rank `rank` of `world` (no MPI launcher variables).
  std::string Env(int rank, int world, const std::string& extra = "") const {
    return "env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE -u PMI_RANK OMP_NUM_THREADS=1 "
           "OPENBLAS_NUM_THREADS=1 CREMA_DIST_TIMEOUT=60 RANK=" +
           std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
           " LOCAL_RANK=" + std::to_string(rank) +
           " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port_) + " " + extra + " ";
  }

  // Runs the commands at once, each under `timeout 120`; returns their exit statuses.
  std::vector<int> RunAll(const std::vector<std::string>& commands) {
    std::string script;
    for (size_t k = 0; k < commands.size(); ++k)
      script += "(timeout 120 " + commands[k] + ") & p" + std::to_string(k) + "=$!\n";
    for (size_t k = 0; k < commands.size(); ++k)
      script += "wait $p" + std::to_string(k) + "; echo $? > " + dir_ + "/code" +
                std::to_string(k) + "\n";
    std::ofstream(dir_ + "/run.sh") << script;
    std::system(("bash " + dir_ + "/run.sh").c_str());
    std::vector<int> codes;
    for (size_t k = 0; k < commands.size(); ++k) {
      std::ifstream in(dir_ + "/code" + std::to_string(k));
      int code = -1;
      in >> code;
      codes.push_back(code);
    }
    return codes;
  }

  // Two ranks with the same arguments (logs rank0.log, rank1.log).
  std::vector<int> TrainTwo(const std::string& args) {
    return RunAll(
        {Env(0, 2) + CremaTrain(args, "rank0.log"), Env(1, 2) + CremaTrain(args, "rank1.log")});
  }

  int port_ = 0;
};

TEST_F(TcpTrainTest, TwoRanksEqualOneProcessWithTwiceTheBatch) {
  constexpr int kIters = 7;
  const std::string single = Solver("single", 6, 1, kIters);
  const std::string multi = Solver("multi", 3, 1, kIters);
  ASSERT_EQ(ExitCode(std::system(CremaTrain("--solver " + single, "single.log").c_str())), 0)
      << Log("single.log");
  ASSERT_EQ(TrainTwo("--solver " + multi), (std::vector<int>{0, 0}))
      << Log("rank0.log") << Log("rank1.log");
  const std::string log = Log("rank0.log");
  EXPECT_NE(log.find("TCP: 2 ranks; this is rank 0"), std::string::npos) << log;
  EXPECT_NE(log.find("2 ranks x batch 3 = global batch 6"), std::string::npos) << log;
  EXPECT_NE(log.find("Gradients averaged with TCP"), std::string::npos) << log;
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel",
                    dir_ + "/multi/snap_iter_7.caffemodel");
  ExpectMoved(dir_ + "/single/snap_iter_7.caffemodel");
}

TEST_F(TcpTrainTest, UnderTorchrunsAgentStoreRankZeroTakesTheNextPort) {
  // torchrun's agent listens on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True); so does this
  // test: the ranks meet on MASTER_PORT + 1.
  const int agent = ListenOn(port_);
  ASSERT_GE(agent, 0);
  const std::string args = "--solver " + Solver("run", 3, 1, 2);
  const auto codes =
      RunAll({Env(0, 2, "TORCHELASTIC_USE_AGENT_STORE=True") + CremaTrain(args, "rank0.log"),
              Env(1, 2, "TORCHELASTIC_USE_AGENT_STORE=True") + CremaTrain(args, "rank1.log")});
  close(agent);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << Log("rank0.log") << Log("rank1.log");
  EXPECT_NE(Log("rank0.log").find("127.0.0.1:" + std::to_string(port_ + 1)), std::string::npos)
      << Log("rank0.log");
}

TEST_F(TcpTrainTest, HDF5DataIsShardedByRankToo) {
  // The records of the DB in two .h5 files of 9 and 11 rows (the shards cross the files).
  std::ofstream list(dir_ + "/h5.txt");
  for (int file = 0, first = 0; file < 2; first += file == 0 ? 9 : 11, ++file) {
    const int rows = file == 0 ? 9 : 11;
    Blob x(std::vector<int>{rows, 2, 2, 2}), label(std::vector<int>{rows});
    for (int r = 0; r < rows; ++r) {
      for (int j = 0; j < 8; ++j)
        x.mutable_cpu_data<float>()[r * 8 + j] = Pixel(first + r, j) * 0.0078125f;
      label.mutable_cpu_data<float>()[r] = static_cast<float>(Label(first + r));
    }
    const std::string path = dir_ + "/part" + std::to_string(file) + ".h5";
    Hdf5File h5(path, Hdf5File::Mode::kCreate);
    WriteBlobToHDF5(h5.id(), "x", x, false);
    WriteBlobToHDF5(h5.id(), "label", label, false);
    h5.Close();
    list << path << "\n";
  }
  list.close();
  source_ = dir_ + "/h5.txt";
  hdf5_ = true;
  const std::string single = Solver("single", 6, 1, 7);
  const std::string multi = Solver("multi", 3, 1, 7);
  ASSERT_EQ(ExitCode(std::system(CremaTrain("--solver " + single, "single.log").c_str())), 0)
      << Log("single.log");
  ASSERT_EQ(TrainTwo("--solver " + multi), (std::vector<int>{0, 0}))
      << Log("rank0.log") << Log("rank1.log");
  EXPECT_NE(Log("rank0.log").find("HDF5Data layer \"data\" is sharded by rank"), std::string::npos)
      << Log("rank0.log");
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel",
                    dir_ + "/multi/snap_iter_7.caffemodel");
}

TEST_F(TcpTrainTest, TwoGpuRanksThroughNcclEqualOneGpuWithTwiceTheBatch) {
  // Each rank takes the GPU of its LOCAL_RANK (NCCL refuses two ranks on one GPU); gradients go
  // through NCCL when built with it.
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices";
  const std::string single = Solver("single", 6, 1, 7, "solver_mode: GPU\n");
  const std::string multi = Solver("multi", 3, 1, 7, "solver_mode: GPU\n");
  ASSERT_EQ(ExitCode(std::system(CremaTrain("--solver " + single, "single.log").c_str())), 0)
      << Log("single.log");
  ASSERT_EQ(TrainTwo("--solver " + multi), (std::vector<int>{0, 0}))
      << Log("rank0.log") << Log("rank1.log");
#ifdef CREMA_WITH_NCCL
  EXPECT_NE(Log("rank0.log").find("Gradients averaged with NCCL"), std::string::npos)
      << Log("rank0.log");
#endif
  // GPU sums run in another order for batch 3 + 3 than for 6.
  ExpectSameWeights(dir_ + "/single/snap_iter_7.caffemodel", dir_ + "/multi/snap_iter_7.caffemodel",
                    1e-4);
}

TEST_F(TcpTrainTest, OverlapWithBackwardChangesNoBit) {
  // Buckets of at most 104 bytes: {ip2 weight 72 + bias 12}, {ip1 weight 192}, {ip1 bias 24};
  // the first is reduced while ReLU and ip1 run backward.
  const std::string solver = Solver("run", 2, 2, 6);
  const std::string small = " --allreduce_bucket_mb=0.0001";
  ASSERT_EQ(TrainTwo("--solver " + solver + small + " --overlap_allreduce=false"),
            (std::vector<int>{0, 0}))
      << Log("rank0.log") << Log("rank1.log");
  EXPECT_NE(Log("rank0.log").find("after backward"), std::string::npos) << Log("rank0.log");
  fs::rename(dir_ + "/run", dir_ + "/after");
  ASSERT_EQ(TrainTwo("--solver " + solver + small + " --overlap_allreduce=true"),
            (std::vector<int>{0, 0}))
      << Log("rank0.log") << Log("rank1.log");
  const std::string log = Log("rank0.log");
  EXPECT_NE(log.find("in 3 bucket(s)"), std::string::npos) << log;
  EXPECT_NE(log.find("overlapped with backward"), std::string::npos) << log;
  ExpectSameWeights(dir_ + "/after/snap_iter_6.caffemodel", dir_ + "/run/snap_iter_6.caffemodel",
                    0);
  // And both equal one process with batch 4 (x iter_size 2).
  ASSERT_EQ(ExitCode(std::system(
                CremaTrain("--solver " + Solver("single", 4, 2, 6), "single.log").c_str())),
            0);
  ExpectSameWeights(dir_ + "/single/snap_iter_6.caffemodel", dir_ + "/run/snap_iter_6.caffemodel");
}

TEST_F(TcpTrainTest, AFailingRankStopsTheOther) {
  const std::string good = Solver("good", 3, 1, 50);
  const std::string bad = Solver("bad", 3, 1, 50);
  BreakSource("bad");
  const auto codes = RunAll({Env(0, 2) + CremaTrain("--solver " + good, "rank0.log"),
                             Env(1, 2) + CremaTrain("--solver " + bad, "rank1.log")});
  EXPECT_EQ(codes, (std::vector<int>{1, 1})) << Log("rank0.log") << Log("rank1.log");
  EXPECT_NE(Log("rank0.log").find("rank 1 of 2 failed: "), std::string::npos) << Log("rank0.log");
  EXPECT_NE(Log("rank0.log").find("no_such_db"), std::string::npos) << Log("rank0.log");
}

TEST_F(TcpTrainTest, AKilledRankStopsTheOther) {
  // Rank 1 is killed (SIGKILL: no message) while the two train; rank 0 sees its socket close.
  const std::string solver = Solver("run", 3, 1, 100000000, "") + " --set display=1000";
  const auto codes =
      RunAll({Env(0, 2) + CremaTrain("--solver " + solver, "rank0.log"),
              Env(1, 2) + "timeout -s KILL 3 " + CremaTrain("--solver " + solver, "rank1.log")});
  EXPECT_EQ(codes, (std::vector<int>{1, 137})) << Log("rank0.log");
  const std::string log = Log("rank0.log");
  EXPECT_TRUE(log.find("rank 1 of 2 closed its connection") != std::string::npos ||
              log.find("rank(s) 1 of WORLD_SIZE 2 never connected") != std::string::npos)
      << log;
}

TEST_F(TcpTrainTest, RendezvousErrorsSayWhatIsWrong) {
  const std::string solver = Solver("run", 3, 1, 2);
  // A rank that never comes.
  EXPECT_EQ(
      RunAll({Env(0, 2, "CREMA_DIST_TIMEOUT=1") + CremaTrain("--solver " + solver, "alone.log")}),
      (std::vector<int>{1}));
  EXPECT_NE(Log("alone.log").find("rank(s) 1 of WORLD_SIZE 2 never connected"), std::string::npos)
      << Log("alone.log");
  // Another WORLD_SIZE.
  const auto codes = RunAll({Env(0, 2) + CremaTrain("--solver " + solver, "rank0.log"),
                             Env(1, 3) + CremaTrain("--solver " + solver, "rank1.log")});
  EXPECT_EQ(codes, (std::vector<int>{1, 1})) << Log("rank0.log") << Log("rank1.log");
  EXPECT_NE(Log("rank0.log")
                .find("rank 1 was started with WORLD_SIZE=3 but rank 0 with "
                      "WORLD_SIZE=2"),
            std::string::npos)
      << Log("rank0.log");
  EXPECT_NE(Log("rank1.log").find("refused rank 1"), std::string::npos) << Log("rank1.log");
  // A port in use.
  const int fd = ListenOn(port_);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(RunAll({Env(0, 2) + CremaTrain("--solver " + solver, "busy.log")}),
            (std::vector<int>{1}));
  close(fd);
  EXPECT_NE(Log("busy.log").find("the port is in use"), std::string::npos) << Log("busy.log");
  // A rank out of range: a usage error (exit 2).
  EXPECT_EQ(RunAll({Env(2, 2) + CremaTrain("--solver " + solver, "range.log")}),
            (std::vector<int>{2}));
  EXPECT_NE(Log("range.log").find("RANK=\"2\": expected a whole number in [0, 1]"),
            std::string::npos)
      << Log("range.log");
}

}  // namespace
}  // namespace crema::dist_test
