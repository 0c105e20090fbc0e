// SGD solver: learning-rate policies, one hand-computed update on a tiny net, the BVLC reference
// run (LeNet on fashion-mnist, 10 iterations), and snapshot/restore equivalence.
#include "solvers/sgd_solver.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/net.hpp"
#include "io/hdf5.hpp"
#include "net/proto_io.hpp"
#include "support/json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

SolverParameter ParseSolver(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return param;
}

// Exposes the protected schedule state.
class TestSGDSolver : public SGDSolver {
 public:
  using SGDSolver::SGDSolver;
  void set_iter(int iter) { iter_ = iter; }
  int current_step() const { return current_step_; }
  double UpdateRate() { return UpdateLearningRate(); }
};

const char* kInputOnlyNet = R"(
  net_param {
    name: "input_only"
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 } } }
  }
)";

std::unique_ptr<TestSGDSolver> MakeScheduleSolver(const std::string& schedule) {
  SolverParameter param = ParseSolver(std::string(kInputOnlyNet) + schedule);
  return std::make_unique<TestSGDSolver>(param, SolverOptions{});
}

double RateAt(TestSGDSolver* solver, int iter) {
  solver->set_iter(iter);
  return solver->GetLearningRate();
}

// ---- (a) learning-rate policies ----

TEST(SGDSolverTest, LearningRatePolicies) {
  // Expected values use the float-rounded parameters, as the solver reads them.
  const double base = 0.1f;
  {
    auto s = MakeScheduleSolver("base_lr: 0.1 lr_policy: 'fixed'");
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 0), base);
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 1000), base);
  }
  {
    auto s = MakeScheduleSolver("base_lr: 0.1 lr_policy: 'step' gamma: 0.5 stepsize: 10");
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 9), base);
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 10), base * 0.5);
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 25), base * 0.25);
    s->set_iter(25);
    s->UpdateRate();
    EXPECT_EQ(s->current_step(), 2);  // Caffe records floor(iter / stepsize)
  }
  {
    auto s = MakeScheduleSolver("base_lr: 0.1 lr_policy: 'exp' gamma: 0.9");
    const double gamma = 0.9f;
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 0), base);
    EXPECT_NEAR(RateAt(s.get(), 3), base * gamma * gamma * gamma, 1e-15);
  }
  {
    auto s = MakeScheduleSolver("base_lr: 0.01 lr_policy: 'inv' gamma: 0.0001 power: 0.75");
    const double b = 0.01f, gamma = 0.0001f, power = 0.75f;
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 0), b);
    EXPECT_NEAR(RateAt(s.get(), 100), b * std::pow(1 + gamma * 100, -power), 1e-15);
    // The reference run's lr at iteration 1: Caffe computes it in float, crema in double.
    EXPECT_NEAR(RateAt(s.get(), 1), 0.00999925006, 1e-9);
  }
  {
    auto s = MakeScheduleSolver("base_lr: 0.1 lr_policy: 'poly' power: 2 max_iter: 100");
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 25), base * 0.75 * 0.75);
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 100), 0);
  }
  {
    auto s = MakeScheduleSolver("base_lr: 0.1 lr_policy: 'sigmoid' gamma: 0.1 stepsize: 50");
    const double gamma = 0.1f;
    EXPECT_NEAR(RateAt(s.get(), 30), base / (1 + std::exp(-gamma * (30 - 50))), 1e-15);
    EXPECT_DOUBLE_EQ(RateAt(s.get(), 50), base / 2);
  }
}

TEST(SGDSolverTest, MultiStepAdvancesOncePerIteration) {
  auto s = MakeScheduleSolver(
      "base_lr: 0.1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 2 stepvalue: 4 stepvalue: 5");
  const double base = 0.1f, gamma = 0.1f;
  const std::vector<int> expected_step = {0, 0, 1, 1, 2, 3, 3, 3};
  for (int iter = 0; iter < static_cast<int>(expected_step.size()); ++iter) {
    s->set_iter(iter);
    const double rate = s->UpdateRate();
    EXPECT_EQ(s->current_step(), expected_step[iter]) << "iter " << iter;
    EXPECT_NEAR(rate, base * std::pow(gamma, expected_step[iter]), 1e-15) << "iter " << iter;
  }
  // A solver that jumps past several stepvalues (e.g. resumed with an old current_step) catches
  // up one step per iteration, as Caffe does.
  auto jump = MakeScheduleSolver(
      "base_lr: 0.1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 2 stepvalue: 4");
  jump->set_iter(10);
  EXPECT_NEAR(jump->UpdateRate(), base * gamma, 1e-15);
  EXPECT_NEAR(jump->UpdateRate(), base * gamma * gamma, 1e-15);
  EXPECT_EQ(jump->current_step(), 2);
  // Through the training loop.
  auto looped = MakeScheduleSolver(
      "base_lr: 0.1 lr_policy: 'multistep' gamma: 0.1 stepvalue: 2 stepvalue: 4 max_iter: 6");
  looped->Step(6);
  EXPECT_EQ(looped->iter(), 6);
  EXPECT_EQ(looped->current_step(), 2);
}

TEST(SGDSolverTest, ConfigErrorsNameTheField) {
  try {
    MakeScheduleSolver("base_lr: 0.1 lr_policy: 'cosine'");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("lr_policy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cosine"), std::string::npos) << e.what();
  }
  try {
    MakeScheduleSolver("base_lr: 0.1 lr_policy: 'step' gamma: 0.1");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("stepsize"), std::string::npos) << e.what();
  }
  try {
    SolverParameter param =
        ParseSolver(std::string(kInputOnlyNet) + "base_lr: 0.1 lr_policy: 'fixed' type: 'SDG'");
    Solver::Create(param);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Did you mean \"SGD\""), std::string::npos) << e.what();
  }
  try {
    SolverParameter param =
        ParseSolver(std::string(kInputOnlyNet) + "train_net: 'x.prototxt' lr_policy: 'fixed'");
    Solver::Create(param);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exactly one"), std::string::npos) << e.what();
  }
  try {
    SolverParameter param =
        ParseSolver(std::string(kInputOnlyNet) + "lr_policy: 'fixed' test_iter: 1");
    Solver::Create(param);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("test_interval"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(SolverRegistry::Has("SGD"));
  // Legacy solver_type is upgraded to type.
  SolverParameter legacy =
      ParseSolver(std::string(kInputOnlyNet) + "lr_policy: 'fixed' solver_type: SGD");
  EXPECT_STREQ(Solver::Create(legacy)->type(), "SGD");
}

// ---- (b) one hand-computed update on a tiny net ----

const char* kTinyNet = R"(
  name: "tiny"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
          inner_product_param { num_output: 2
            weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

struct TinyCase {
  std::string name;
  std::string settings;
  double weight_decay;
  bool l1;
  double clip;  // < 0: none
};

// Gradient of mean softmax cross-entropy of x W^T + b (N x K inputs, O outputs).
void TinyGradient(const std::vector<double>& x, const std::vector<int>& labels,
                  const std::vector<double>& w, const std::vector<double>& b, int n, int k, int o,
                  std::vector<double>* dw, std::vector<double>* db) {
  dw->assign(w.size(), 0);
  db->assign(b.size(), 0);
  for (int i = 0; i < n; ++i) {
    std::vector<double> logits(o);
    double max_logit = -1e300;
    for (int j = 0; j < o; ++j) {
      logits[j] = b[j];
      for (int c = 0; c < k; ++c) logits[j] += x[i * k + c] * w[j * k + c];
      max_logit = std::max(max_logit, logits[j]);
    }
    double sum = 0;
    for (int j = 0; j < o; ++j) sum += std::exp(logits[j] - max_logit);
    for (int j = 0; j < o; ++j) {
      const double g = (std::exp(logits[j] - max_logit) / sum - (labels[i] == j)) / n;
      (*db)[j] += g;
      for (int c = 0; c < k; ++c) (*dw)[j * k + c] += g * x[i * k + c];
    }
  }
}

TEST(SGDSolverTest, TwoStepsMatchHandComputedUpdates) {
  const std::vector<TinyCase> cases = {
      {"L2", "", 0.01, false, -1},
      {"L1", "regularization_type: 'L1'", 0.01, true, -1},
      {"clip", "clip_gradients: 0.05", 0.01, false, 0.05},
      {"iter_size", "iter_size: 2", 0.01, false, -1},
  };
  const int n = 4, k = 3, o = 2;
  const double lr = 0.1f, momentum = 0.9f;
  const std::vector<double> x = {0.5, -1.0, 0.25, 1.5, 0.1, -0.3, -0.7, 0.8, 0.9, 0.2, 0.4, -1.2};
  const std::vector<int> labels = {0, 1, 1, 0};
  for (const TinyCase& c : cases) {
    SCOPED_TRACE(c.name);
    SetRandomSeed(1701);
    SolverParameter param = ParseSolver(std::string("net_param {") + kTinyNet + "} " +
                                        "base_lr: 0.1 lr_policy: 'fixed' momentum: 0.9 "
                                        "max_iter: 2 display: 0 weight_decay: " +
                                        std::to_string(c.weight_decay) + " " + c.settings);
    auto solver = Solver::Create(param);
    Net* net = solver->net();
    Blob* data = net->blob_by_name("data").get();
    Blob* label = net->blob_by_name("label").get();
    ASSERT_NE(data, nullptr);
    for (int i = 0; i < n * k; ++i) data->mutable_cpu_data<float>()[i] = static_cast<float>(x[i]);
    for (int i = 0; i < n; ++i) label->mutable_cpu_data<float>()[i] = static_cast<float>(labels[i]);
    Blob* weight = net->layer_by_name("ip")->blobs()[0].get();
    Blob* bias = net->layer_by_name("ip")->blobs()[1].get();
    std::vector<double> w(weight->count()), b(bias->count());
    for (size_t i = 0; i < w.size(); ++i) w[i] = weight->data_at(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = bias->data_at(i);
    const double wd = static_cast<float>(c.weight_decay);
    std::vector<double> hw(w.size(), 0), hb(b.size(), 0), dw, db;
    for (int step = 0; step < 2; ++step) {
      TinyGradient(x, labels, w, b, n, k, o, &dw, &db);
      if (c.clip >= 0) {
        double sumsq = 0;
        for (double v : dw) sumsq += v * v;
        for (double v : db) sumsq += v * v;
        const double norm = std::sqrt(sumsq), clip = static_cast<float>(c.clip);
        ASSERT_GT(norm, clip) << "the case should clip";
        for (double& v : dw) v *= clip / norm;
        for (double& v : db) v *= clip / norm;
      }
      for (size_t i = 0; i < w.size(); ++i) {
        const double decay = c.l1 ? (w[i] > 0) - (w[i] < 0) : w[i];
        hw[i] = momentum * hw[i] + lr * 1 * (dw[i] + wd * 1 * decay);
        w[i] -= hw[i];
      }
      for (size_t i = 0; i < b.size(); ++i) {  // lr_mult 2, decay_mult 0
        hb[i] = momentum * hb[i] + lr * 2 * db[i];
        b[i] -= hb[i];
      }
    }
    solver->Step(2);
    EXPECT_EQ(solver->iter(), 2);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(weight->data_at(i), w[i], 2e-6) << i;
    for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(bias->data_at(i), b[i], 2e-6) << i;
    const auto& history = static_cast<const SGDSolver&>(*solver).history();
    ASSERT_EQ(history.size(), 2u);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(history[0]->data_at(i), hw[i], 2e-6) << i;
    for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(history[1]->data_at(i), hb[i], 2e-6) << i;
  }
}

// ---- helpers for the LeNet runs ----

// Runs in `dir` for the lifetime of the object (the reference net's Data sources are relative).
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::string& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

std::vector<double> Values(const BlobProto& blob) {
  if (blob.double_data_size() > 0) return {blob.double_data().begin(), blob.double_data().end()};
  return {blob.data().begin(), blob.data().end()};
}

// ||a - b|| / ||b||.
double RelativeDiff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::map<std::string, std::vector<std::vector<double>>> ModelBlobs(const std::string& path) {
  NetParameter param;
  ReadNetParamsFromBinaryFile(path, &param);
  std::map<std::string, std::vector<std::vector<double>>> blobs;
  for (const LayerParameter& layer : param.layer())
    for (const BlobProto& blob : layer.blobs()) blobs[layer.name()].push_back(Values(blob));
  return blobs;
}

// The max over blobs of the per-blob relative difference of `ours` against `reference`.
double MaxModelDiff(const std::string& ours, const std::string& reference) {
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

double MaxHistoryDiff(const SolverState& ours, const SolverState& reference) {
  EXPECT_EQ(ours.history_size(), reference.history_size());
  double worst = 0;
  for (int i = 0; i < std::min(ours.history_size(), reference.history_size()); ++i) {
    const double d = RelativeDiff(Values(ours.history(i)), Values(reference.history(i)));
    EXPECT_LT(d, 1e-4) << "history " << i;
    worst = std::max(worst, d);
  }
  return worst;
}

double Score(const std::vector<std::pair<std::string, double>>& scores, const std::string& name) {
  for (const auto& [key, value] : scores)
    if (key == name) return value;
  ADD_FAILURE() << "no test output " << name;
  return 0;
}

// ---- (c) the BVLC reference run ----

TEST(SGDSolverTest, MatchesCaffeReferenceRun) {
  CREMA_REQUIRE_REFERENCE(solver_file, "bvlc/solvers/sgd/solver.prototxt");
  const std::string bvlc = fs::path(solver_file).parent_path().parent_path().parent_path();
  const std::string ref = bvlc + "/solvers/sgd";
  const testing::Json losses = testing::ParseJson(testing::ReadFile(ref + "/losses.json"));
  const std::string dir = testing::TempDir();
  fs::create_directory_symlink(bvlc + "/fmnist_small", dir + "/fmnist_small");
  ScopedCwd cwd(dir);

  SolverParameter param;
  auto source = ReadSolverParamsFromTextFile(solver_file, &param);
  param.set_snapshot_prefix(dir + "/sgd");
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
  const testing::Json& iterations = losses["iterations"];
  ASSERT_EQ(loss_by_iter.size(), iterations.size());
  double worst_loss = 0;
  for (size_t i = 0; i < iterations.size(); ++i) {
    const double expected = iterations[i]["loss"].number;
    const double d = std::abs(loss_by_iter[i] - expected) / std::abs(expected);
    EXPECT_LT(d, 1e-4) << "iteration " << i << ": " << loss_by_iter[i] << " vs " << expected;
    worst_loss = std::max(worst_loss, d);
    if (i + 1 < iterations.size()) {
      EXPECT_NEAR(next_lr[i], iterations[i + 1]["lr"].number, 1e-9) << "iteration " << i + 1;
    }
  }
  // Caffe's own test lines (6 digits) at 0, 5 and 10.
  for (const testing::Json& t : losses["tests_from_log"].array) {
    const int iter = static_cast<int>(t["iter"].number);
    SCOPED_TRACE("test at iteration " + std::to_string(iter));
    ASSERT_TRUE(tests.count(iter));
    EXPECT_NEAR(Score(tests[iter], "accuracy"), t["outputs"]["accuracy"].number, 1e-6);
    EXPECT_NEAR(Score(tests[iter], "loss"), t["outputs"]["loss"].number, 1e-5);
  }

  // The snapshot Solve() wrote at the end against Caffe's.
  const std::string model = dir + "/sgd_iter_10.caffemodel";
  const double worst_param = MaxModelDiff(model, ref + "/sgd_iter_10.caffemodel");
  SolverState ours, theirs;
  ReadBinaryProto(dir + "/sgd_iter_10.solverstate", &ours);
  ReadBinaryProto(ref + "/sgd_iter_10.solverstate", &theirs);
  EXPECT_EQ(ours.iter(), 10);
  EXPECT_EQ(ours.learned_net(), model);
  EXPECT_EQ(ours.current_step(), theirs.current_step());
  const double worst_history = MaxHistoryDiff(ours, theirs);
  std::printf("vs Caffe: max relative diff params %.3g, history %.3g, loss %.3g\n", worst_param,
              worst_history, worst_loss);
  RecordProperty("max_param_rel_diff", std::to_string(worst_param));
  RecordProperty("max_history_rel_diff", std::to_string(worst_history));
  RecordProperty("max_loss_rel_diff", std::to_string(worst_loss));

  // Caffe's own solverstate restores into a fresh solver. Its learned_net
  // ("solvers/sgd/sgd_iter_10.caffemodel") is relative to bvlc/, not to this cwd: the model is
  // found beside the state file.
  auto resumed = Solver::Create(param, options);
  resumed->Restore(ref + "/sgd_iter_10.solverstate");
  EXPECT_EQ(resumed->iter(), 10);
  const std::string resumed_model = dir + "/resumed.caffemodel";
  NetParameter resumed_param;
  resumed->net()->ToProto(&resumed_param);
  WriteBinaryProto(resumed_param, resumed_model);
  EXPECT_EQ(MaxModelDiff(resumed_model, ref + "/sgd_iter_10.caffemodel"), 0.0);
  const auto& history = static_cast<const SGDSolver&>(*resumed).history();
  ASSERT_EQ(static_cast<int>(history.size()), theirs.history_size());
  for (size_t i = 0; i < history.size(); ++i) {
    BlobProto restored;
    history[i]->ToProto(&restored);
    EXPECT_EQ(RelativeDiff(Values(restored), Values(theirs.history(static_cast<int>(i)))), 0.0);
  }
}

// ---- (d) snapshot, restore, continue == straight training ----

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

  std::unique_ptr<Solver> Make(const std::string& prefix, int max_iter,
                               SolverParameter::SnapshotFormat format, bool init) const {
    SolverParameter param;
    ReadSolverParamsFromTextFile(bvlc + "/solvers/sgd/solver.prototxt", &param);
    param.clear_test_iter();
    param.set_test_interval(0);
    param.set_max_iter(max_iter);
    param.set_snapshot_prefix(dir + "/" + prefix);
    param.set_snapshot_format(format);
    SolverOptions options;
    options.base_dir = bvlc;
    auto solver = Solver::Create(param, options);
    if (init) solver->net()->CopyTrainedLayersFrom(bvlc + "/solvers/lenet_init.caffemodel");
    return solver;
  }
};

std::vector<std::vector<float>> ParamValues(const Net& net) {
  std::vector<std::vector<float>> values;
  for (const Blob* blob : net.learnable_params())
    values.emplace_back(blob->cpu_data<float>(), blob->cpu_data<float>() + blob->count());
  return values;
}

std::vector<std::vector<float>> HistoryValues(const Solver& solver) {
  std::vector<std::vector<float>> values;
  for (const BlobPtr& blob : static_cast<const SGDSolver&>(solver).history())
    values.emplace_back(blob->cpu_data<float>(), blob->cpu_data<float>() + blob->count());
  return values;
}

TEST(SGDSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  LenetRun run;
  ScopedCwd cwd(run.dir);
  auto straight = run.Make("straight", 10, SolverParameter::BINARYPROTO, true);
  straight->Solve();
  const auto expected_params = ParamValues(*straight->net());
  const auto expected_history = HistoryValues(*straight);

  for (auto format : {SolverParameter::BINARYPROTO, SolverParameter::HDF5}) {
    const bool hdf5 = format == SolverParameter::HDF5;
    SCOPED_TRACE(hdf5 ? "HDF5" : "binary proto");
    const std::string prefix = hdf5 ? "split_h5" : "split";
    auto first = run.Make(prefix, 5, format, true);
    first->Solve();
    const std::string state =
        run.dir + "/" + prefix + "_iter_5" + (hdf5 ? ".solverstate.h5" : ".solverstate");
    ASSERT_TRUE(fs::exists(state));
    ASSERT_TRUE(
        fs::exists(run.dir + "/" + prefix + "_iter_5" + (hdf5 ? ".caffemodel.h5" : ".caffemodel")));
    first.reset();

    auto second = run.Make(prefix, 10, format, false);
    second->Solve(state);
    EXPECT_EQ(second->iter(), 10);
    EXPECT_TRUE(ParamValues(*second->net()) == expected_params) << "params differ";
    EXPECT_TRUE(HistoryValues(*second) == expected_history) << "history differs";
  }
  // The binary snapshots themselves are byte-identical.
  EXPECT_EQ(testing::ReadFile(run.dir + "/straight_iter_10.caffemodel"),
            testing::ReadFile(run.dir + "/split_iter_10.caffemodel"));
}

TEST(SGDSolverTest, HDF5SolverStateLayout) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  LenetRun run;
  ScopedCwd cwd(run.dir);
  auto solver = run.Make("h5", 1, SolverParameter::HDF5, true);
  solver->Solve();
  Hdf5File file(run.dir + "/h5_iter_1.solverstate.h5", Hdf5File::Mode::kRead);
  EXPECT_EQ(ReadHdf5Int(file.id(), "iter"), 1);
  EXPECT_EQ(ReadHdf5Int(file.id(), "current_step"), 0);
  EXPECT_EQ(ReadHdf5String(file.id(), "learned_net"), run.dir + "/h5_iter_1.caffemodel.h5");
  Hdf5Handle history(file.OpenGroup("history"));
  const auto& blobs = static_cast<const SGDSolver&>(*solver).history();
  ASSERT_EQ(Hdf5ChildNames(history.get()).size(), blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    EXPECT_EQ(Hdf5DatasetShape(history.get(), std::to_string(i)), blobs[i]->shape());
    Blob read;
    ReadBlobFromHDF5(history.get(), std::to_string(i), &read, true);
    for (int64_t j = 0; j < read.count(); ++j)
      ASSERT_EQ(read.data_at(j), blobs[i]->data_at(j)) << "history " << i << " element " << j;
  }
  // A history blob of the wrong shape is a ConfigError naming both shapes.
  Blob wrong(std::vector<int>{3, 3});
  try {
    ReadBlobFromHDF5(history.get(), "0", &wrong, false);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 3)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema
