// The data layers' read positions across a snapshot (Data on an LMDB, ImageData and HDF5Data
// with shuffle; binary and HDF5 solver states; an old state without them), and the epoch-based
// solver fields (max_epoch, test_interval_epochs, test_whole_set).
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "io/data_transformer.hpp"
#include "io/db.hpp"
#include "io/hdf5.hpp"
#include "solvers/datum_db.hpp"
#include "support/requires.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

constexpr int kC = 2, kH = 6, kW = 6;

uint8_t Pixel(int item, int c, int h, int w) {
  return static_cast<uint8_t>((item * 41 + c * 97 + h * 11 + w * 5) % 256);
}
int Label(int item) { return (item * 7) % 5; }

// An LMDB (or LevelDB) of `n` raw C x H x W records written with io/db; returns its path.
std::string WriteLmdb(const std::string& name, int n, db::Backend backend = db::Backend::kLmdb) {
  return testing_db::WriteDatumDb(
      name, n, kC, kH, kW,
      [](int i, int j) { return Pixel(i, j / (kH * kW), (j / kW) % kH, j % kW); }, Label, backend);
}

// `n` PNG images (3 x kH x kW) and a list of "path label" lines; returns the list's path.
std::string WriteImageList(const std::string& name, int n) {
  const std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream list(dir + "/list.txt");
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> planes;
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w) planes.push_back(Pixel(i, c, h, w));
    const std::string file = dir + "/" + std::to_string(i) + ".png";
    const std::string png = EncodeImage(planes.data(), 3, kH, kW, ".png");
    std::ofstream(file, std::ios::binary)
        .write(png.data(), static_cast<std::streamsize>(png.size()));
    list << file << " " << Label(i) << "\n";
  }
  return dir + "/list.txt";
}

// One HDF5 file of `rows` rows ("data": rows x kC x kH x kW, "label": rows) and its list.
std::string WriteHdf5List(const std::string& name, int rows) {
  const std::string dir = testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  Blob data(DataType::kFloat32), label(DataType::kFloat32);
  data.Reshape(std::vector<int>{rows, kC, kH, kW});
  label.Reshape(std::vector<int>{rows});
  float* d = data.mutable_cpu_data<float>();
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < kC * kH * kW; ++j) d[i * kC * kH * kW + j] = Pixel(i, 0, 0, j) / 255.0f;
    label.mutable_cpu_data<float>()[i] = static_cast<float>(Label(i));
  }
  {
    Hdf5File file(dir + "/a.h5", Hdf5File::Mode::kCreate);
    WriteBlobToHDF5(file.id(), "data", data, false);
    WriteBlobToHDF5(file.id(), "label", label, false);
    file.Close();
  }
  std::ofstream(dir + "/list.txt") << dir << "/a.h5\n";
  return dir + "/list.txt";
}

std::string DataLayer(const std::string& lmdb, int batch, const std::string& phase = "TRAIN") {
  return StrCat(R"(layer { name: "data" type: "Data" top: "data" top: "label"
                   include { phase: )",
                phase, R"( } data_param { source: ")", lmdb, R"(" backend: LMDB batch_size: )",
                batch, R"( prefetch: 4 decode_threads: 2 }
                   transform_param { crop_size: 4 mirror: true scale: 0.01 } })");
}

// data -> InnerProduct(5) -> SoftmaxWithLoss, trained with momentum (history matters too).
std::string SolverText(const std::string& data_layer, const std::string& extra = "") {
  return StrCat(R"(net_param { name: "reader" )", data_layer, R"(
      layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
              inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 }
                                    bias_filler { type: "constant" value: 0.1 } } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" } }
    base_lr: 0.5 momentum: 0.9 lr_policy: "fixed" display: 0 random_seed: 11 max_iter: 100
    snapshot_after_train: false )",
                extra);
}

std::unique_ptr<Solver> MakeSolver(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return Solver::Create(param);
}

std::vector<std::vector<float>> Weights(const Solver& solver) {
  std::vector<std::vector<float>> weights;
  for (const Blob* blob : solver.net()->learnable_params()) {
    const float* data = blob->cpu_data<float>();
    weights.emplace_back(data, data + blob->count());
  }
  return weights;
}

// Bitwise: the same float bits, not merely close values.
bool SameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// 10 straight iterations, and 5 + snapshot + restore into a new solver + 5.
struct Runs {
  std::vector<std::vector<float>> straight, resumed;
  std::string state_file;
};
Runs TrainBothWays(const std::string& text, const std::string& prefix, bool hdf5) {
  Runs runs;
  const std::string snapshot =
      StrCat(" snapshot_prefix: \"", prefix, "\"", hdf5 ? " snapshot_format: HDF5" : "");
  {
    auto solver = MakeSolver(text + snapshot);
    solver->Step(10);
    runs.straight = Weights(*solver);
  }
  {
    auto solver = MakeSolver(text + snapshot);
    solver->Step(5);
    solver->Snapshot();
  }
  runs.state_file = StrCat(prefix, "_iter_5.solverstate", hdf5 ? ".h5" : "");
  auto solver = MakeSolver(text + snapshot);
  solver->Restore(runs.state_file);
  EXPECT_EQ(solver->iter(), 5);
  solver->Step(5);
  runs.resumed = Weights(*solver);
  return runs;
}

TEST(SolverDataState, DataLayerResumesAtTheConsumedBatch) {
  // 37 records in batches of 8: 5 iterations end inside the second pass, with up to 4 more
  // batches prefetched; random crops and mirrors.
  const std::string lmdb = WriteLmdb("resume_lmdb", 37);
  for (bool hdf5 : {false, true}) {
    SCOPED_TRACE(hdf5 ? "HDF5 state" : "binary state");
    const Runs runs = TrainBothWays(SolverText(DataLayer(lmdb, 8)),
                                    testing::TempDir() + (hdf5 ? "/data_h5" : "/data_bin"), hdf5);
    EXPECT_TRUE(SameBits(runs.straight, runs.resumed));
  }
}

TEST(SolverDataState, StateHoldsThePositionOfTheConsumedBatches) {
  const std::string lmdb = WriteLmdb("position_lmdb", 37);
  const std::string prefix = testing::TempDir() + "/position";
  auto solver = MakeSolver(SolverText(DataLayer(lmdb, 8)) + " snapshot_prefix: \"" + prefix + "\"");
  solver->Step(5);
  solver->Snapshot();
  SolverState state;
  ReadBinaryProto(prefix + "_iter_5.solverstate", &state);
  ASSERT_EQ(state.data_state_size(), 1);
  EXPECT_EQ(state.data_state(0).layer(), "data");
  EXPECT_EQ(state.data_state(0).type(), "Data");
  EXPECT_EQ(state.data_state(0).net(), 0);
  // 5 batches of 8 = 40 records: the next one is record 40 - 37 = 3 (not where prefetch is).
  EXPECT_EQ(state.data_state(0).position(), 3);
  EXPECT_EQ(state.data_state(0).pass_size(), 37);
  EXPECT_FALSE(state.data_state(0).transform_rng().empty());
}

TEST(SolverDataState, TestNetPositionResumes) {
  // Tests every 2 iterations read 3 batches each from a test net's own reader; a test pass after
  // the restore continues where the tests before the snapshot stopped.
  const std::string lmdb = WriteLmdb("test_net_lmdb", 37);
  const std::string prefix = testing::TempDir() + "/test_net";
  const std::string text =
      SolverText(DataLayer(lmdb, 8) + DataLayer(lmdb, 8, "TEST")) +
      " test_iter: 3 test_interval: 2 test_initialization: false snapshot_prefix: \"" + prefix +
      "\"";
  std::vector<std::pair<std::string, double>> straight;
  {
    auto solver = MakeSolver(text);
    solver->Step(10);
    straight = solver->TestAll()[0];
  }
  {
    auto solver = MakeSolver(text);
    solver->Step(5);
    solver->Snapshot();
  }
  SolverState state;
  ReadBinaryProto(prefix + "_iter_5.solverstate", &state);
  ASSERT_EQ(state.data_state_size(), 2);
  EXPECT_EQ(state.data_state(1).net(), 1);
  EXPECT_EQ(state.data_state(1).position(), 48 - 37);  // tests at 2 and 4: 6 batches of 8
  auto solver = MakeSolver(text);
  solver->Restore(prefix + "_iter_5.solverstate");
  solver->Step(5);
  const auto resumed = solver->TestAll()[0];
  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(straight[i].second, resumed[i].second);
}

TEST(SolverDataState, OldStateWithoutPositionsStillResumes) {
  const std::string lmdb = WriteLmdb("old_lmdb", 37);
  const std::string prefix = testing::TempDir() + "/old";
  const std::string text = SolverText(DataLayer(lmdb, 8)) + " snapshot_prefix: \"" + prefix + "\"";
  const Runs runs = TrainBothWays(SolverText(DataLayer(lmdb, 8)), prefix, false);
  ASSERT_TRUE(SameBits(runs.straight, runs.resumed));
  // The same state as Caffe writes it: no data_state.
  SolverState state;
  ReadBinaryProto(runs.state_file, &state);
  state.clear_data_state();
  WriteBinaryProto(state, runs.state_file);
  auto solver = MakeSolver(text);
  solver->Restore(runs.state_file);
  EXPECT_EQ(solver->iter(), 5);
  solver->Step(5);
  // It trains on, from the first record: so not the straight run's batches.
  EXPECT_EQ(solver->iter(), 10);
  EXPECT_FALSE(SameBits(runs.straight, Weights(*solver)));
}

TEST(SolverDataState, ImageDataWithShuffleResumes) {
  CREMA_SKIP_WITHOUT_OPENCV();
  // 13 images in batches of 4, reshuffled after every pass (10 batches = 3 passes).
  const std::string list = WriteImageList("resume_images", 13);
  const std::string layer = StrCat(R"(layer { name: "data" type: "ImageData" top: "data"
      top: "label" image_data_param { source: ")",
                                   list, R"(" batch_size: 4 shuffle: true decode_threads: 2 }
      transform_param { crop_size: 4 mirror: true scale: 0.01 } })");
  for (bool hdf5 : {false, true}) {
    SCOPED_TRACE(hdf5 ? "HDF5 state" : "binary state");
    const Runs runs = TrainBothWays(SolverText(layer),
                                    testing::TempDir() + (hdf5 ? "/img_h5" : "/img_bin"), hdf5);
    EXPECT_TRUE(SameBits(runs.straight, runs.resumed));
  }
}

TEST(SolverDataState, HDF5DataWithShuffleResumes) {
  const std::string list = WriteHdf5List("resume_hdf5", 11);
  const std::string layer = StrCat(R"(layer { name: "data" type: "HDF5Data" top: "data"
      top: "label" hdf5_data_param { source: ")",
                                   list, R"(" batch_size: 4 shuffle: true } })");
  const Runs runs = TrainBothWays(SolverText(layer), testing::TempDir() + "/hdf5_bin", false);
  EXPECT_TRUE(SameBits(runs.straight, runs.resumed));
}

// ---- epochs ----

TEST(SolverEpochs, MaxEpochFromTheRecordCount) {
  const std::string lmdb = WriteLmdb("epoch_lmdb", 37);
  const std::string base = SolverText(DataLayer(lmdb, 8));
  const std::string without_max_iter =
      base.substr(0, base.find("max_iter: 100")) + base.substr(base.find("max_iter: 100") + 13);
  // ceil(2 * 37 / 8) = ceil(9.25) = 10; with iter_size 2: ceil(74 / 16) = 5.
  EXPECT_EQ(MakeSolver(without_max_iter + " max_epoch: 2")->param().max_iter(), 10);
  EXPECT_EQ(MakeSolver(without_max_iter + " max_epoch: 2 iter_size: 2")->param().max_iter(), 5);
  // 0.1 epoch of 80 records in batches of 8 is exactly 1 iteration (despite 0.1f's rounding).
  const std::string lmdb80 = WriteLmdb("epoch_lmdb80", 80);
  const std::string base80 = SolverText(DataLayer(lmdb80, 8));
  EXPECT_EQ(MakeSolver(base80.substr(0, base80.find("max_iter: 100")) + " max_epoch: 0.1")
                ->param()
                .max_iter(),
            1);
  if (db::HasLevelDb()) {  // LevelDB counts its records by walking them
    std::string leveldb =
        SolverText(DataLayer(WriteLmdb("epoch_leveldb", 37, db::Backend::kLevelDb), 8));
    leveldb.replace(leveldb.find("backend: LMDB"), 13, "backend: LEVELDB");
    leveldb.erase(leveldb.find("max_iter: 100"), 13);
    EXPECT_EQ(MakeSolver(leveldb + " max_epoch: 2")->param().max_iter(), 10);
  }
  // test_interval_epochs 0.5: ceil(18.5 / 8) = 3.
  auto solver = MakeSolver(without_max_iter + " max_epoch: 1 test_interval_epochs: 0.5");
  EXPECT_EQ(solver->param().test_interval(), 3);
  EXPECT_EQ(solver->param().max_iter(), 5);  // ceil(37 / 8)
  solver->Solve();
  EXPECT_EQ(solver->iter(), 5);
}

TEST(SolverEpochs, ImageDataAndHDF5DataKnowTheirSize) {
  CREMA_SKIP_WITHOUT_OPENCV();
  const std::string list = WriteImageList("epoch_images", 13);
  const std::string images = StrCat(R"(layer { name: "data" type: "ImageData" top: "data"
      top: "label" image_data_param { source: ")",
                                    list, R"(" batch_size: 4 } })");
  std::string text = SolverText(images);
  text.erase(text.find("max_iter: 100"), 13);
  EXPECT_EQ(MakeSolver(text + " max_epoch: 3")->param().max_iter(), 10);  // ceil(39 / 4)
  const std::string h5 = WriteHdf5List("epoch_hdf5", 11);
  text = SolverText(StrCat(R"(layer { name: "data" type: "HDF5Data" top: "data" top: "label"
      hdf5_data_param { source: ")",
                           h5, R"(" batch_size: 4 } })"));
  text.erase(text.find("max_iter: 100"), 13);
  EXPECT_EQ(MakeSolver(text + " max_epoch: 1")->param().max_iter(), 3);  // ceil(11 / 4)
}

std::string ConfigErrorOf(const std::string& text) {
  try {
    MakeSolver(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(SolverEpochs, ErrorsNameTheField) {
  const std::string dummy = R"(net_param { name: "d"
      layer { name: "x" type: "DummyData" top: "x" top: "t"
              dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
              inner_product_param { num_output: 2 } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" } }
    base_lr: 0.1 lr_policy: "fixed" display: 0 )";
  EXPECT_NE(ConfigErrorOf(dummy + "max_epoch: 1").find("max_epoch needs a data layer"),
            std::string::npos);
  EXPECT_NE(ConfigErrorOf(dummy + "max_iter: 5 test_interval_epochs: 1")
                .find("test_interval_epochs needs a data layer"),
            std::string::npos);
  // The generic net (net_param) is also a test net, so it is the one without a size here.
  EXPECT_NE(ConfigErrorOf(dummy + "test_whole_set: true test_interval: 1")
                .find("test_whole_set needs a data layer"),
            std::string::npos);
  std::string train_only = dummy;
  train_only.replace(0, 9, "train_net_param");
  EXPECT_NE(ConfigErrorOf(train_only + "test_whole_set: true test_interval: 1").find("no test net"),
            std::string::npos);
  const std::string lmdb = WriteLmdb("error_lmdb", 37);
  // max_epoch replaces a max_iter (e.g. one in the file, with --set max_epoch=1).
  EXPECT_EQ(MakeSolver(SolverText(DataLayer(lmdb, 8)) + " max_epoch: 1")->param().max_iter(), 5);
  std::string with_test = SolverText(DataLayer(lmdb, 8) + DataLayer(lmdb, 8, "TEST"));
  EXPECT_NE(ConfigErrorOf(with_test + " test_whole_set: true test_iter: 3 test_interval: 5")
                .find("leave test_iter unset"),
            std::string::npos);
  // A test net fed by DummyData has no size.
  const std::string dummy_test = StrCat(dummy, " test_whole_set: true test_interval: 1",
                                        R"( test_net_param { name: "t"
      layer { name: "x" type: "DummyData" top: "x" dummy_data_param { shape { dim: 4 } } } })");
  EXPECT_NE(ConfigErrorOf(dummy_test).find("test_whole_set needs a data layer"), std::string::npos);
}

TEST(SolverEpochs, TestWholeSetCoversTheSetOncePerPass) {
  const std::string lmdb = WriteLmdb("whole_lmdb", 37);
  // The test net's output: the mean label of each batch (Reduction MEAN over the batch).
  const std::string text = StrCat(R"(
    train_net_param { name: "train"
      layer { name: "x" type: "DummyData" top: "x" top: "t"
              dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
              inner_product_param { num_output: 2 } }
      layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" } }
    test_net_param { name: "test"
      layer { name: "data" type: "Data" top: "data" top: "label"
              data_param { source: ")",
                                  lmdb, R"(" backend: LMDB batch_size: 8 } }
      layer { name: "mean" type: "Reduction" bottom: "label" top: "mean_label"
              reduction_param { operation: MEAN } }
      layer { name: "sink" type: "Silence" bottom: "data" } }
    test_whole_set: true test_interval: 100 base_lr: 0.1 lr_policy: "fixed" display: 0
    max_iter: 1 test_initialization: false)");
  auto solver = MakeSolver(text);
  ASSERT_EQ(solver->param().test_iter_size(), 1);
  EXPECT_EQ(solver->param().test_iter(0), 5);  // ceil(37 / 8)
  // 5 batches: records 0..36, then the last batch wraps to records 0, 1, 2.
  double sum = 0;
  for (int i = 0; i < 37; ++i) sum += Label(i);
  for (int i = 0; i < 3; ++i) sum += Label(i);
  const double expected = sum / 40;
  for (int pass = 0; pass < 3; ++pass) {
    const auto scores = solver->TestAll();
    ASSERT_EQ(scores.size(), 1u);
    ASSERT_EQ(scores[0].size(), 1u);
    EXPECT_NEAR(scores[0][0].second, expected, 1e-6) << "pass " << pass;
  }
}

}  // namespace
}  // namespace crema
