#pragma once
// The fixture of the multi-process training tests (mpi_train_test, tcp_train_test): an LMDB of
// kRecords 2x2x2 records with labels 0..2, an MLP over it (Data -> InnerProduct 6 -> ReLU ->
// InnerProduct 3 -> SoftmaxWithLoss, no random transforms), solver files, logs and the weights of
// a .caffemodel. Rank r of N reads the records i with i % N == r, so N ranks with batch B see
// together what one process with batch N x B sees; with SoftmaxWithLoss's VALID normalization
// the averaged gradient is that batch's gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "crema/proto_io.hpp"
#include "solvers/datum_db.hpp"

namespace crema::dist_test {

namespace fs = std::filesystem;

constexpr int kRecords = 20;  // 10 per rank: the batches wrap mid-pass

// `source`: an LMDB, or a list of .h5 files (`hdf5`) holding the same records, already scaled.
inline std::string Net(const std::string& source, int batch, bool hdf5 = false) {
  const std::string data = hdf5 ? R"(layer { name: "data" type: "HDF5Data" top: "x" top: "label"
  hdf5_data_param { source: ")" + source +
                                      R"(" batch_size: )" + std::to_string(batch) + R"( } }
)"
                                : R"(layer { name: "data" type: "Data" top: "x" top: "label"
  transform_param { scale: 0.0078125 }
  data_param { source: ")" + source + R"(" backend: LMDB batch_size: )" +
                                      std::to_string(batch) + R"( } }
)";
  return R"(name: "mlp"
)" + data +
         R"(
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.3 }
                        bias_filler { type: "uniform" min: -0.1 max: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "s"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }
)";
}

class DistTrainTest : public ::testing::Test {
 protected:
  // A fresh directory and DB named after the test.
  void MakeData(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/" + prefix + "_" + info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    source_ =
        testing_db::WriteDatumDb(prefix + "_db_" + info->name(), kRecords, 2, 2, 2, Pixel, Label);
  }
  static uint8_t Pixel(int i, int j) {
    return static_cast<uint8_t>((i * 37 + j * 11 + i * j * 5) % 256);
  }
  static int Label(int i) { return (i * 7) % 3; }

  // Writes <name>_net.prototxt and <name>_solver.prototxt; returns the solver path.
  std::string Solver(const std::string& name, int batch, int iter_size, int max_iter,
                     const std::string& extra = "") {
    const std::string net = dir_ + "/" + name + "_net.prototxt";
    std::ofstream(net) << Net(source_, batch, hdf5_);
    const std::string solver = dir_ + "/" + name + "_solver.prototxt";
    std::ofstream(solver) << "net: \"" << net << "\"\n"
                          << "type: \"SGD\" base_lr: 0.5 momentum: 0.9 weight_decay: 0.01\n"
                          << "lr_policy: \"fixed\" random_seed: 7 display: 1\n"
                          << "iter_size: " << iter_size << " max_iter: " << max_iter << "\n"
                          << "snapshot_prefix: \"" << dir_ << "/" << name << "/snap\"\n"
                          << extra;
    return solver;
  }

  // Makes <name>_net.prototxt read a DB that does not exist.
  void BreakSource(const std::string& name) {
    std::ifstream in(dir_ + "/" + name + "_net.prototxt");
    std::stringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    text.replace(text.find(source_), source_.size(), dir_ + "/no_such_db");
    std::ofstream(dir_ + "/" + name + "_net.prototxt") << text;
  }

  // The command line of `crema train ARGS`, its output to LOG in the test's directory.
  std::string CremaTrain(const std::string& args, const std::string& log) const {
    return std::string(CREMA_BINARY_DIR) + "/crema train --alsologtostderr=1 --progress=off " +
           args + " > " + dir_ + "/" + log + " 2>&1";
  }

  static int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128; }

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

  // Within 1e-5 relative (`tolerance` 0: bit for bit).
  static void ExpectSameWeights(const std::string& a, const std::string& b,
                                double tolerance = 1e-5) {
    const auto wa = Weights(a), wb = Weights(b);
    ASSERT_EQ(wa.size(), 4u);  // ip1 and ip2: weight and bias
    ASSERT_EQ(wa.size(), wb.size());
    for (size_t k = 0; k < wa.size(); ++k) {
      ASSERT_EQ(wa[k].size(), wb[k].size());
      for (size_t i = 0; i < wa[k].size(); ++i) {
        if (tolerance == 0)
          EXPECT_EQ(wa[k][i], wb[k][i]) << "blob " << k << " element " << i;
        else
          EXPECT_NEAR(wa[k][i], wb[k][i], tolerance * std::max(1.0f, std::fabs(wa[k][i])))
              << "blob " << k << " element " << i;
      }
    }
  }

  // The weights moved during `iters` iterations: a comparison is not between initial weights.
  void ExpectMoved(const std::string& caffemodel) {
    const auto trained = Weights(caffemodel);
    const std::string solver = Solver("zero", 6, 1, 0);
    ASSERT_EQ(ExitCode(std::system(CremaTrain("--solver " + solver, "zero.log").c_str())), 0)
        << Log("zero.log");
    const auto init = Weights(dir_ + "/zero/snap_iter_0.caffemodel");
    double moved = 0;
    for (size_t i = 0; i < init[0].size(); ++i) moved += std::fabs(init[0][i] - trained[0][i]);
    EXPECT_GT(moved, 1e-2);
  }

  std::string dir_, source_;
  bool hdf5_ = false;  // source_ lists .h5 files
};

}  // namespace crema::dist_test
