// `mpirun -np 2 crema train` (data-parallel over MPI, solvers/distributed.hpp) against a single
// process with twice the batch: a Data layer over an LMDB, no random transforms; rank r reads the
// records i with i % 2 == r, so the two ranks' batches of B together are the single run's batch
// of 2B, and with SoftmaxWithLoss's VALID normalization the averaged gradient is that batch's
// gradient. The weights after K iterations must agree within 1e-5 (relative). Skips without MPI
// in the build or without mpirun on PATH.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "net/proto_io.hpp"
#include "solvers/datum_db.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

constexpr int kRecords = 20;  // 10 per rank: the batches wrap mid-pass

std::string Mpirun() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && fs::exists(fs::path(dir) / "mpirun")) return (fs::path(dir) / "mpirun");
  return "";
}

// Data (batch `batch`) -> InnerProduct 6 -> ReLU -> InnerProduct 3 -> SoftmaxWithLoss.
std::string Net(const std::string& source, int batch) {
  return R"(name: "mlp"
layer { name: "data" type: "Data" top: "x" top: "label"
  transform_param { scale: 0.0078125 }
  data_param { source: ")" +
         source + R"(" backend: LMDB batch_size: )" + std::to_string(batch) + R"( } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.3 }
                        bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "s"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";
}

class MpiTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CREMA_WITH_MPI
    GTEST_SKIP() << "crema was built without MPI (CREMA_MPI)";
#endif
    mpirun_ = Mpirun();
    if (mpirun_.empty()) GTEST_SKIP() << "mpirun is not on PATH";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/mpi_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    source_ = testing_db::WriteDatumDb(
        std::string("mpi_db_") + info->name(), kRecords, 2, 2, 2,
        [](int i, int j) { return static_cast<uint8_t>((i * 37 + j * 11 + i * j * 5) % 256); },
        [](int i) { return (i * 7) % 3; });
  }

  // Writes <name>.prototxt (net + solver) and returns the solver path.
  std::string Solver(const std::string& name, int batch, int iter_size, int max_iter,
                     const std::string& extra = "") {
    const std::string net = dir_ + "/" + name + "_net.prototxt";
    std::ofstream(net) << Net(source_, batch);
    const std::string solver = dir_ + "/" + name + "_solver.prototxt";
    std::ofstream(solver) << "net: \"" << net << "\"\n"
                          << "type: \"SGD\" base_lr: 0.5 momentum: 0.9 weight_decay: 0.01\n"
                          << "lr_policy: \"fixed\" random_seed: 7 display: 1\n"
                          << "iter_size: " << iter_size << " max_iter: " << max_iter << "\n"
                          << "snapshot_prefix: \"" << dir_ << "/" << name << "/snap\"\n"
                          << extra;
    return solver;
  }

  // Runs `args` after crema (under mpirun -np 2 when `ranks` is 2); returns the exit status.
  // `wrapper` (e.g. "timeout 120 ") goes before mpirun.
  int Train(int ranks, const std::string& args, const std::string& log,
            const std::string& wrapper = "") {
    const std::string crema = std::string(CREMA_BINARY_DIR) + "/crema";
    std::string command = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ";
    if (ranks > 1)
      command +=
          "OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo "
          "OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_plm_rsh_agent=false " +
          wrapper + mpirun_ + " --allow-run-as-root --oversubscribe --bind-to none -np " +
          std::to_string(ranks) + " ";
    command += crema + " train --alsologtostderr=1 --progress=off " + args + " > " + dir_ + "/" +
               log + " 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }

  std::string Log(const std::string& log) const {
    std::ifstream in(dir_ + "/" + log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  static std::vector<std::vector<float>> Weights(const std::string& caffemodel) {
    NetParameter param;
    ReadBinaryProto(caffemodel, &param);
    std::vector<std::vector<float>> blobs;
    for (const LayerParameter& layer : param.layer())
      for (const BlobProto& blob : layer.blobs())
        blobs.emplace_back(blob.data().begin(), blob.data().end());
    return blobs;
  }

  static void ExpectSameWeights(const std::string& a, const std::string& b) {
    const auto wa = Weights(a), wb = Weights(b);
    ASSERT_EQ(wa.size(), 4u);  // ip1 and ip2: weight and bias
    ASSERT_EQ(wa.size(), wb.size());
    for (size_t k = 0; k < wa.size(); ++k) {
      ASSERT_EQ(wa[k].size(), wb[k].size());
      for (size_t i = 0; i < wa[k].size(); ++i)
        EXPECT_NEAR(wa[k][i], wb[k][i], 1e-5 * std::max(1.0f, std::fabs(wa[k][i])))
            << "blob " << k << " element " << i;
    }
  }

  std::string mpirun_, dir_, source_;
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
  // The weights moved: the comparison is not between two copies of the initial weights.
  const auto start = Weights(dir_ + "/single/snap_iter_7.caffemodel");
  ASSERT_EQ(Train(1, "--solver " + Solver("zero", 6, 1, 0), "zero.log"), 0) << Log("zero.log");
  const auto init = Weights(dir_ + "/zero/snap_iter_0.caffemodel");
  double moved = 0;
  for (size_t i = 0; i < init[0].size(); ++i) moved += std::fabs(init[0][i] - start[0][i]);
  EXPECT_GT(moved, 1e-2);
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
  std::string text;
  {
    std::ifstream in(dir_ + "/bad_net.prototxt");
    std::stringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  const size_t at = text.find(source_);
  text.replace(at, source_.size(), dir_ + "/no_such_db");
  std::ofstream(dir_ + "/bad_net.prototxt") << text;
  EXPECT_NE(Train(2, "--solver " + solver, "bad.log"), 0);
  EXPECT_NE(Log("bad.log").find("aborting all ranks"), std::string::npos) << Log("bad.log");
}

}  // namespace
}  // namespace crema
