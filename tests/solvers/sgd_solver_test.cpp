// SGD solver: learning-rate policies, one hand-computed update on a tiny net, the BVLC reference
// run (LeNet on fashion-mnist, 10 iterations), and snapshot/restore equivalence.
#include "solvers/sgd_solver.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/net.hpp"
#include "io/hdf5.hpp"
#include "solvers/solver_checks.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

using namespace solver_checks;  // NOLINT(build/namespaces)

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

const char* kSoftmaxNet = R"(
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
void SoftmaxGradient(const std::vector<double>& x, const std::vector<int>& labels,
                     const std::vector<double>& w, const std::vector<double>& b, int n, int k,
                     int o, std::vector<double>* dw, std::vector<double>* db) {
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
    SolverParameter param = ParseSolver(std::string("net_param {") + kSoftmaxNet + "} " +
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
      SoftmaxGradient(x, labels, w, b, n, k, o, &dw, &db);
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

// ---- (b2) the step fused into InnerProduct's Backward ----

// Two InnerProducts sharing their weights (not fused: two layers write the gradient), one with
// multipliers (fused), one frozen (lr_mult 0: no gradient, no fusion); 37 inputs, not a whole
// number of vectors, so the kernel's last columns take the step too.
const char* kFusedStepNet = R"(
  name: "fused"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 8 dim: 37 } shape { dim: 8 } } }
  layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" param { name: "shared" }
          inner_product_param { num_output: 37 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" param { name: "shared" }
          inner_product_param { num_output: 37 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
          param { lr_mult: 2 decay_mult: 3 } param { lr_mult: 1 }
          inner_product_param { num_output: 19 weight_filler { type: "gaussian" std: 0.3 }
                                bias_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "ip4" type: "InnerProduct" bottom: "ip3" top: "ip4" param { lr_mult: 0 }
          inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip4" bottom: "label" top: "loss" }
)";

std::unique_ptr<Solver> FusedStepSolver(bool fuse, float input_scale = 1) {
  SetRandomSeed(1702);
  SolverParameter param = ParseSolver(std::string("net_param {") + kFusedStepNet + "} " +
                                      "base_lr: 0.05 lr_policy: 'step' gamma: 0.5 stepsize: 2 "
                                      "momentum: 0.9 weight_decay: 0.004 max_iter: 5 display: 0");
  SolverOptions options;
  options.fuse_update = fuse;
  auto solver = Solver::Create(param, options);
  Net* net = solver->net();
  Blob* data = net->blob_by_name("data").get();
  Blob* label = net->blob_by_name("label").get();
  for (int64_t i = 0; i < data->count(); ++i)
    data->mutable_cpu_data<float>()[i] = input_scale * std::sin(0.7f * static_cast<float>(i));
  for (int64_t i = 0; i < label->count(); ++i)
    label->mutable_cpu_data<float>()[i] = static_cast<float>(i % 5);
  return solver;
}

TEST(SGDSolverTest, FusedStepHasTheBitsOfTheStepAfterBackward) {
  auto fused = FusedStepSolver(true);
  auto plain = FusedStepSolver(false);
  fused->Step(5);
  plain->Step(5);
  const auto& a = fused->net()->learnable_params();
  const auto& b = plain->net()->learnable_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(fused->net()->param_display_names()[i]);
    const size_t bytes = a[i]->count() * sizeof(float);
    EXPECT_EQ(0, std::memcmp(a[i]->cpu_data<float>(), b[i]->cpu_data<float>(), bytes));
    EXPECT_EQ(0, std::memcmp(a[i]->cpu_diff<float>(), b[i]->cpu_diff<float>(), bytes));
    EXPECT_EQ(0, std::memcmp(History(*fused)[i]->cpu_data<float>(),
                             History(*plain)[i]->cpu_data<float>(), bytes));
  }
  // Trained: the weights moved from where the same seed started them.
  auto start = FusedStepSolver(true);
  EXPECT_NE(0, std::memcmp(a[3]->cpu_data<float>(),
                           start->net()->learnable_params()[3]->cpu_data<float>(),
                           a[3]->count() * sizeof(float)));
}

TEST(SGDSolverTest, OnlyAnUnsharedLearningInnerProductWeightTakesTheFusedStep) {
  auto solver = FusedStepSolver(true);
  Net* net = solver->net();
  const auto& params = net->learnable_params();
  std::vector<Layer::SgdStep> steps(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    steps[i] = {0.1f, 0.9f, 0.f, History(*solver)[i].get()};
  net->SetFusedSgdSteps(steps);
  net->ClearParamDiffs(/*lazily=*/true);
  net->ForwardBackward();
  const std::vector<char> taken = net->FusedSgdStepsTaken();
  ASSERT_EQ(taken.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(taken[i] != 0, params[i] == net->layer_by_name("ip3")->blobs()[0].get())
        << net->param_display_names()[i];
  }
  // Cleared: the next Backward takes none.
  net->ClearParamDiffs(/*lazily=*/true);
  net->ForwardBackward();
  for (char t : net->FusedSgdStepsTaken()) EXPECT_EQ(t, 0);
}

TEST(SGDSolverTest, ANonFiniteLossStopsBeforeTheFusedStep) {
  auto solver = FusedStepSolver(true, 3e38f);
  const Blob* weight = solver->net()->layer_by_name("ip3")->blobs()[0].get();
  const std::vector<float> before(weight->cpu_data<float>(),
                                  weight->cpu_data<float>() + weight->count());
  EXPECT_THROW(solver->Step(1), RuntimeError);
  EXPECT_EQ(0,
            std::memcmp(before.data(), weight->cpu_data<float>(), before.size() * sizeof(float)));
}

// ---- (c) the BVLC reference run ----

TEST(SGDSolverTest, MatchesCaffeReferenceRun) {
  CREMA_REQUIRE_REFERENCE(solver_file, "bvlc/solvers/sgd/solver.prototxt");
  ReferenceRunResult result;
  CheckReferenceRun(solver_file, "sgd", 1e-4, &result);
}

// ---- (d) snapshot, restore, continue == straight training ----

TEST(SGDSolverTest, SnapshotRestoreContinueIsBitwiseStraightTraining) {
  CREMA_REQUIRE_REFERENCE(unused, "bvlc/fmnist_small/train320_lmdb");
  CheckResumeIsBitwise("", 1);
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
  const auto& blobs = History(*solver);
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
