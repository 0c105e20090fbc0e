#pragma once
// Checks shared by the solver tests: a tiny net trained against an update rule written in double
// by the test, the BVLC reference runs (LeNet on fashion-mnist, 10 iterations), and snapshot /
// restore / continue equivalence. Header-only: each *_test.cpp is its own executable.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "crema/device.hpp"
#include "crema/error.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "io/json.hpp"
#include "solvers/sgd_solver.hpp"
#include "support/reference.hpp"

namespace crema::solver_checks {

namespace fs = std::filesystem;

inline SolverParameter ParseSolver(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return param;
}

inline const std::vector<BlobPtr>& History(const Solver& solver) {
  return static_cast<const SGDSolver&>(solver).history();
}

// The message of the ConfigError `f` throws ("" and a test failure when it throws none).
inline std::string ConfigErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

// ---- a tiny net against an update rule in double ----

// InnerProduct (3 -> 2; weight lr_mult 1 decay_mult 1, bias lr_mult 2 decay_mult 0.5) and
// EuclideanLoss on 4 fixed samples.
inline const char* kTinyNet = R"(
  name: "tiny"
  layer { name: "data" type: "Input" top: "data" top: "target"
          input_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0.5 }
          inner_product_param { num_output: 2 } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }
)";
constexpr int kTinyN = 4, kTinyK = 3, kTinyO = 2;
inline const std::vector<double> kTinyX = {0.5,  -1.0, 0.25, 1.5, 0.1, -0.3,
                                           -0.7, 0.8,  0.9,  0.2, 0.4, -1.2};
inline const std::vector<double> kTinyTarget = {1.0, -0.5, 0.3, 0.8, -1.1, 0.2, 0.6, 0.4};
inline const std::vector<double> kTinyW = {0.3, -0.2, 0.5, -0.4, 0.1, 0.25};
inline const std::vector<double> kTinyB = {0.05, -0.15};

// The state a rule keeps for one param (one vector per history set) and its step.
struct ParamState {
  std::vector<std::vector<double>> history;
};
// Turns the gradient g (already normalized and decayed) of one param into the step subtracted
// from it, updating `state`. `iter` is the solver's iteration (0 for the first update).
using ReferenceRule = std::function<void(int iter, double local_rate, const std::vector<double>& g,
                                         ParamState* state, std::vector<double>* step)>;

// Gradient of the mean-over-samples Euclidean loss 1/(2N) sum ||x W^T + b - t||^2.
inline void TinyGradient(const std::vector<double>& w, const std::vector<double>& b,
                         std::vector<double>* dw, std::vector<double>* db) {
  dw->assign(w.size(), 0);
  db->assign(b.size(), 0);
  for (int i = 0; i < kTinyN; ++i) {
    for (int j = 0; j < kTinyO; ++j) {
      double y = b[j];
      for (int c = 0; c < kTinyK; ++c) y += kTinyX[i * kTinyK + c] * w[j * kTinyK + c];
      const double r = (y - kTinyTarget[i * kTinyO + j]) / kTinyN;
      (*db)[j] += r;
      for (int c = 0; c < kTinyK; ++c) (*dw)[j * kTinyK + c] += r * kTinyX[i * kTinyK + c];
    }
  }
}

// A solver over the tiny net with the fixed inputs and weights, on `device`.
inline std::unique_ptr<Solver> MakeTinySolver(const std::string& settings,
                                              Device device = Device::Cpu()) {
  SolverParameter param =
      ParseSolver(std::string("net_param {") + kTinyNet + "} display: 0 " + settings);
  SolverOptions options;
  options.device = device;
  auto solver = Solver::Create(param, options);
  Net* net = solver->net();
  Blob* data = net->blob_by_name("data").get();
  Blob* target = net->blob_by_name("target").get();
  for (size_t i = 0; i < kTinyX.size(); ++i)
    data->mutable_cpu_data<float>()[i] = static_cast<float>(kTinyX[i]);
  for (size_t i = 0; i < kTinyTarget.size(); ++i)
    target->mutable_cpu_data<float>()[i] = static_cast<float>(kTinyTarget[i]);
  const auto& blobs = net->layer_by_name("ip")->blobs();
  for (size_t i = 0; i < kTinyW.size(); ++i)
    blobs[0]->mutable_cpu_data<float>()[i] = static_cast<float>(kTinyW[i]);
  for (size_t i = 0; i < kTinyB.size(); ++i)
    blobs[1]->mutable_cpu_data<float>()[i] = static_cast<float>(kTinyB[i]);
  return solver;
}

inline void ExpectClose(const Blob& blob, const std::vector<double>& expected,
                        const std::string& what) {
  ASSERT_EQ(blob.count(), static_cast<int64_t>(expected.size())) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(blob.data_at(static_cast<int64_t>(i)), expected[i],
                1e-5 * std::abs(expected[i]) + 1e-7)
        << what << " element " << i;
}

// Trains the tiny net `iters` iterations with `settings` (which must set base_lr and may set
// weight_decay and iter_size; the schedule is "step" with gamma 0.5 and stepsize 2) and compares
// the params and every history blob with `rule` applied in double.
inline void CheckTinyNetAgainstRule(const std::string& settings, int num_history_sets,
                                    const ReferenceRule& rule, int iters = 3) {
  SCOPED_TRACE(settings);
  auto solver = MakeTinySolver(settings + " lr_policy: 'step' gamma: 0.5 stepsize: 2");
  const SolverParameter& param = solver->param();
  const double base_lr = param.base_lr(), weight_decay = param.weight_decay();
  const double lr_mult[2] = {1, 2}, decay_mult[2] = {1, 0.5};
  std::vector<double> value[2] = {kTinyW, kTinyB};
  ParamState state[2];
  for (int p = 0; p < 2; ++p)
    state[p].history.assign(num_history_sets, std::vector<double>(value[p].size(), 0.0));
  for (int iter = 0; iter < iters; ++iter) {
    std::vector<double> gradient[2], step;
    TinyGradient(value[0], value[1], &gradient[0], &gradient[1]);
    const double rate = base_lr * std::pow(0.5, iter / 2);
    for (int p = 0; p < 2; ++p) {
      for (size_t i = 0; i < value[p].size(); ++i)
        gradient[p][i] += weight_decay * decay_mult[p] * value[p][i];
      rule(iter, rate * lr_mult[p], gradient[p], &state[p], &step);
      for (size_t i = 0; i < value[p].size(); ++i) value[p][i] -= step[i];
    }
  }
  solver->Step(iters);
  ASSERT_EQ(solver->iter(), iters);
  const auto& blobs = solver->net()->layer_by_name("ip")->blobs();
  ExpectClose(*blobs[0], value[0], "weight");
  ExpectClose(*blobs[1], value[1], "bias");
  const auto& history = History(*solver);
  ASSERT_EQ(history.size(), static_cast<size_t>(2 * num_history_sets));
  for (int s = 0; s < num_history_sets; ++s)
    for (int p = 0; p < 2; ++p)
      ExpectClose(*history[2 * s + p], state[p].history[s],
                  "history set " + std::to_string(s) + " param " + std::to_string(p));
}

// The same iterations on the CPU and on cuda:0 agree (skips without a device).
inline void CheckGpuMatchesCpu(const std::string& settings) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto cpu = MakeTinySolver(settings + " lr_policy: 'fixed'");
  auto gpu = MakeTinySolver(settings + " lr_policy: 'fixed'", Device::Cuda(0));
  cpu->Step(3);
  gpu->Step(3);
  const auto& cpu_params = cpu->net()->learnable_params();
  const auto& gpu_params = gpu->net()->learnable_params();
  for (size_t p = 0; p < cpu_params.size(); ++p)
    for (int64_t i = 0; i < cpu_params[p]->count(); ++i)
      EXPECT_NEAR(gpu_params[p]->data_at(i), cpu_params[p]->data_at(i), 1e-6) << p << " " << i;
  const auto& cpu_history = History(*cpu);
  const auto& gpu_history = History(*gpu);
  ASSERT_EQ(cpu_history.size(), gpu_history.size());
  for (size_t h = 0; h < cpu_history.size(); ++h)
    for (int64_t i = 0; i < cpu_history[h]->count(); ++i)
      EXPECT_NEAR(gpu_history[h]->data_at(i), cpu_history[h]->data_at(i),
                  1e-5 * std::abs(cpu_history[h]->data_at(i)) + 1e-7)
          << "history " << h << " element " << i;
}

// `solver_type: <legacy_enum>` (Caffe's deprecated selector) creates a SolverClass registered as
// `type`, whose history holds `num_history_sets` sets of blobs shaped like the params, in Caffe's
// order (all params of the first set, then all of the next).
template <typename SolverClass>
void CheckTypeAndLegacyEnum(const std::string& legacy_enum, const std::string& type,
                            int num_history_sets) {
  EXPECT_TRUE(SolverRegistry::Has(type));
  auto solver = MakeTinySolver("solver_type: " + legacy_enum + " base_lr: 0.1 lr_policy: 'fixed'");
  EXPECT_EQ(solver->type(), type);
  EXPECT_NE(dynamic_cast<SolverClass*>(solver.get()), nullptr);
  const auto& params = solver->net()->learnable_params();
  const auto& history = History(*solver);
  ASSERT_EQ(history.size(), num_history_sets * params.size());
  for (size_t i = 0; i < history.size(); ++i)
    EXPECT_EQ(history[i]->shape(), params[i % params.size()]->shape()) << i;
}

// ---- the BVLC reference runs ----

// Runs in `dir` for the lifetime of the object (the reference net's Data sources are relative).
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::string& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

inline std::vector<double> Values(const BlobProto& blob) {
  if (blob.double_data_size() > 0) return {blob.double_data().begin(), blob.double_data().end()};
  return {blob.data().begin(), blob.data().end()};
}

// ||a - b|| / ||b||.
inline double RelativeDiff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::map<std::string, std::vector<std::vector<double>>> ModelBlobs(const std::string& path) {
  NetParameter param;
  ReadNetParamsFromBinaryFile(path, &param);
  std::map<std::string, std::vector<std::vector<double>>> blobs;
  for (const LayerParameter& layer : param.layer())
    for (const BlobProto& blob : layer.blobs()) blobs[layer.name()].push_back(Values(blob));
  return blobs;
}

// The max over blobs of the per-blob relative difference of `ours` against `reference`.
inline double MaxModelDiff(const std::string& ours, const std::string& reference) {
  const auto a = ModelBlobs(ours), b = ModelBlobs(reference);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& [name, ref_blobs] : b) {
    auto it = a.find(name);
    if (it == a.end()) {
      ADD_FAILURE() << "layer " << name << " missing from " << ours;
      continue;
    }
    EXPECT_EQ(it->second.size(), ref_blobs.size()) << name;
    for (size_t j = 0; j < std::min(ref_blobs.size(), it->second.size()); ++j) {
      const double d = RelativeDiff(it->second[j], ref_blobs[j]);
      EXPECT_LT(d, 1e-4) << "layer " << name << " blob " << j;
      worst = std::max(worst, d);
    }
  }
  return worst;
}

inline double MaxHistoryDiff(const SolverState& ours, const SolverState& reference,
                             double tolerance) {
  EXPECT_EQ(ours.history_size(), reference.history_size());
  double worst = 0;
  for (int i = 0; i < std::min(ours.history_size(), reference.history_size()); ++i) {
    const double d = RelativeDiff(Values(ours.history(i)), Values(reference.history(i)));
    EXPECT_LT(d, tolerance) << "history " << i;
    worst = std::max(worst, d);
  }
  return worst;
}

inline double Score(const std::vector<std::pair<std::string, double>>& scores,
                    const std::string& name) {
  for (const auto& [key, value] : scores)
    if (key == name) return value;
  ADD_FAILURE() << "no test output " << name;
  return 0;
}

struct ReferenceRunResult {
  double worst_param = 0, worst_history = 0, worst_loss = 0;
};

// Replays the reference run bvlc/solvers/<run>/ (`solver_file` is its solver.prototxt) as
// `caffe train --weights lenet_init.caffemodel` does and compares per-iteration losses and rates,
// the tests at 0, 5 and 10, the final snapshot (params within 1e-4 relative, history within
// `history_tolerance`), then restores Caffe's own .solverstate into a fresh solver.
inline void CheckReferenceRun(const std::string& solver_file, const std::string& run,
                              double history_tolerance, ReferenceRunResult* result) {
  const std::string bvlc = fs::path(solver_file).parent_path().parent_path().parent_path();
  const std::string ref = bvlc + "/solvers/" + run;
  const Json losses = ParseJson(testing::ReadFile(ref + "/losses.json"));
  const std::string dir = testing::TempDir();
  fs::create_directory_symlink(bvlc + "/fmnist_small", dir + "/fmnist_small");
  ScopedCwd cwd(dir);

  SolverParameter param;
  auto source = ReadSolverParamsFromTextFile(solver_file, &param);
  param.set_snapshot_prefix(dir + "/" + run);
  SolverOptions options;
  options.source = source;
  options.base_dir = bvlc;
  std::unique_ptr<Solver> solver = Solver::Create(param, options);
  // As `caffe train --weights`: into the train net and the test nets.
  const std::string init = bvlc + "/solvers/lenet_init.caffemodel";
  solver->net()->CopyTrainedLayersFrom(init);
  for (const auto& test_net : solver->test_nets()) test_net->CopyTrainedLayersFrom(init);
  ASSERT_EQ(solver->test_nets().size(), 1u);

  // Each test pass covers the 500 test images exactly, so extra passes change nothing else.
  std::map<int, std::vector<std::pair<std::string, double>>> tests;
  tests[0] = solver->TestAll()[0];
  std::vector<double> loss_by_iter, next_lr;
  Solver* raw = solver.get();
  solver->add_iteration_callback([&](const Solver& s) {
    loss_by_iter.push_back(s.smoothed_loss());
    next_lr.push_back(s.GetLearningRate());
    if (s.iter() == 5) tests[5] = raw->TestAll()[0];
  });
  EXPECT_NEAR(solver->GetLearningRate(), losses["iterations"][0]["lr"].number, 1e-9);
  solver->Solve();
  EXPECT_EQ(solver->iter(), 10);
  tests[10] = solver->TestAll()[0];

  // Per-iteration losses and rates.
  const Json& iterations = losses["iterations"];
  ASSERT_EQ(loss_by_iter.size(), iterations.size());
  for (size_t i = 0; i < iterations.size(); ++i) {
    const double expected = iterations[i]["loss"].number;
    const double d = std::abs(loss_by_iter[i] - expected) / std::abs(expected);
    EXPECT_LT(d, 1e-4) << "iteration " << i << ": " << loss_by_iter[i] << " vs " << expected;
    result->worst_loss = std::max(result->worst_loss, d);
    if (i + 1 < iterations.size()) {
      EXPECT_NEAR(next_lr[i], iterations[i + 1]["lr"].number, 1e-9) << "iteration " << i + 1;
    }
  }
  // Caffe's own test lines (6 digits) at 0, 5 and 10.
  for (const Json& t : losses["tests_from_log"].array) {
    const int iter = static_cast<int>(t["iter"].number);
    SCOPED_TRACE("test at iteration " + std::to_string(iter));
    ASSERT_TRUE(tests.count(iter));
    EXPECT_NEAR(Score(tests[iter], "accuracy"), t["outputs"]["accuracy"].number, 1e-6);
    EXPECT_NEAR(Score(tests[iter], "loss"), t["outputs"]["loss"].number, 1e-5);
  }

  // The snapshot Solve() wrote at the end against Caffe's.
  const std::string model = dir + "/" + run + "_iter_10.caffemodel";
  const std::string state_name = "/" + run + "_iter_10.solverstate";
  result->worst_param = MaxModelDiff(model, ref + "/" + run + "_iter_10.caffemodel");
  SolverState ours, theirs;
  ReadBinaryProto(dir + state_name, &ours);
  ReadBinaryProto(ref + state_name, &theirs);
  EXPECT_EQ(ours.iter(), 10);
  EXPECT_EQ(ours.learned_net(), model);
  EXPECT_EQ(ours.current_step(), theirs.current_step());
  result->worst_history = MaxHistoryDiff(ours, theirs, history_tolerance);
  std::printf("%s vs Caffe: max relative diff params %.3g, history %.3g, loss %.3g\n", run.c_str(),
              result->worst_param, result->worst_history, result->worst_loss);
  ::testing::Test::RecordProperty("max_param_rel_diff", std::to_string(result->worst_param));
  ::testing::Test::RecordProperty("max_history_rel_diff", std::to_string(result->worst_history));
  ::testing::Test::RecordProperty("max_loss_rel_diff", std::to_string(result->worst_loss));

  // Caffe's own solverstate restores into a fresh solver. Its learned_net
  // ("solvers/<run>/<run>_iter_10.caffemodel") is relative to bvlc/, not to this cwd: the model
  // is found beside the state file.
  auto resumed = Solver::Create(param, options);
  resumed->Restore(ref + state_name);
  EXPECT_EQ(resumed->iter(), 10);
  const std::string resumed_model = dir + "/resumed.caffemodel";
  NetParameter resumed_param;
  resumed->net()->ToProto(&resumed_param);
  WriteBinaryProto(resumed_param, resumed_model);
  EXPECT_EQ(MaxModelDiff(resumed_model, ref + "/" + run + "_iter_10.caffemodel"), 0.0);
  const auto& history = History(*resumed);
  ASSERT_EQ(static_cast<int>(history.size()), theirs.history_size());
  for (size_t i = 0; i < history.size(); ++i) {
    BlobProto restored;
    history[i]->ToProto(&restored);
    EXPECT_EQ(RelativeDiff(Values(restored), Values(theirs.history(static_cast<int>(i)))), 0.0);
  }
}

// ---- snapshot, restore, continue == straight training ----

struct LenetRun {
  std::string bvlc;
  std::string dir;

  // train320 holds exactly 5 batches of 64, so iterations 5-9 of a straight run read the same
  // batches as iterations 5-9 of a run restored at 5 with a fresh Data layer.
  LenetRun() {
    const std::string ref = testing::ReferencePath("bvlc/solvers/sgd/solver.prototxt");
    bvlc = fs::path(ref).parent_path().parent_path().parent_path();
    dir = testing::TempDir();
    fs::create_directory(dir + "/fmnist_small");
    fs::create_directory_symlink(bvlc + "/fmnist_small/train320_lmdb",
                                 dir + "/fmnist_small/train_lmdb");
    fs::create_directory_symlink(bvlc + "/fmnist_small/test_lmdb", dir + "/fmnist_small/test_lmdb");
  }

  // The sgd reference solver without tests, with `settings` (text format) merged over it.
  std::unique_ptr<Solver> Make(const std::string& prefix, int max_iter,
                               SolverParameter::SnapshotFormat format, bool init,
                               const std::string& settings = "") const {
    SolverParameter param;
    ReadSolverParamsFromTextFile(bvlc + "/solvers/sgd/solver.prototxt", &param);
    param.clear_test_iter();
    param.set_test_interval(0);
    param.set_max_iter(max_iter);
    param.set_snapshot_prefix(dir + "/" + prefix);
    param.set_snapshot_format(format);
    EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(settings, &param)) << settings;
    SolverOptions options;
    options.base_dir = bvlc;
    auto solver = Solver::Create(param, options);
    if (init) solver->net()->CopyTrainedLayersFrom(bvlc + "/solvers/lenet_init.caffemodel");
    return solver;
  }
};

inline std::vector<std::vector<float>> ParamValues(const Net& net) {
  std::vector<std::vector<float>> values;
  for (const Blob* blob : net.learnable_params())
    values.emplace_back(blob->cpu_data<float>(), blob->cpu_data<float>() + blob->count());
  return values;
}

inline std::vector<std::vector<float>> HistoryValues(const Solver& solver) {
  std::vector<std::vector<float>> values;
  for (const BlobPtr& blob : History(solver))
    values.emplace_back(blob->cpu_data<float>(), blob->cpu_data<float>() + blob->count());
  return values;
}

// 5 iterations, Snapshot, a fresh solver restored from it, 5 more == 10 straight iterations,
// bit for bit, with binary proto and HDF5 snapshots. `settings` picks the solver (text format).
// Expects `num_history_sets` history blobs per learnable param.
inline void CheckResumeIsBitwise(const std::string& settings, int num_history_sets) {
  SCOPED_TRACE(settings);
  LenetRun run;
  ScopedCwd cwd(run.dir);
  auto straight = run.Make("straight", 10, SolverParameter::BINARYPROTO, true, settings);
  straight->Solve();
  const auto expected_params = ParamValues(*straight->net());
  const auto expected_history = HistoryValues(*straight);
  ASSERT_EQ(expected_history.size(), num_history_sets * straight->net()->learnable_params().size());
  for (const auto& blob : expected_params)
    for (float v : blob) ASSERT_TRUE(std::isfinite(v)) << "training diverged";

  for (auto format : {SolverParameter::BINARYPROTO, SolverParameter::HDF5}) {
    const bool hdf5 = format == SolverParameter::HDF5;
    SCOPED_TRACE(hdf5 ? "HDF5" : "binary proto");
    const std::string prefix = hdf5 ? "split_h5" : "split";
    auto first = run.Make(prefix, 5, format, true, settings);
    first->Solve();
    const std::string state =
        run.dir + "/" + prefix + "_iter_5" + (hdf5 ? ".solverstate.h5" : ".solverstate");
    ASSERT_TRUE(fs::exists(state));
    ASSERT_TRUE(
        fs::exists(run.dir + "/" + prefix + "_iter_5" + (hdf5 ? ".caffemodel.h5" : ".caffemodel")));
    first.reset();

    auto second = run.Make(prefix, 10, format, false, settings);
    second->Solve(state);
    EXPECT_EQ(second->iter(), 10);
    EXPECT_TRUE(ParamValues(*second->net()) == expected_params) << "params differ";
    EXPECT_TRUE(HistoryValues(*second) == expected_history) << "history differs";
  }
  // The binary snapshots themselves are byte-identical.
  EXPECT_EQ(testing::ReadFile(run.dir + "/straight_iter_10.caffemodel"),
            testing::ReadFile(run.dir + "/split_iter_10.caffemodel"));
}

}  // namespace crema::solver_checks
