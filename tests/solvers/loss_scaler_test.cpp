// FP16 training's dynamic loss scaling (solvers/loss_scaler.hpp) through the solver: an overflow
// skips the update and halves the scale, clean iterations double it, training then goes on; the
// scale is saved in the .solverstate, so a resumed --amp fp16 run ends with the uninterrupted
// run's weights bit for bit; bf16 needs no scaler.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

const char* kNet = R"(
  name: "small"
  layer { name: "data" type: "DummyData" top: "data" top: "label"
          dummy_data_param { shape { dim: 16 dim: 2 dim: 10 dim: 10 } shape { dim: 16 }
                             data_filler { type: "gaussian" std: 1 }
                             data_filler { type: "constant" value: 2 } } }
  layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
          convolution_param { num_output: 8 kernel_size: 3 weight_filler { type: "xavier" } } }
  layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
  layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
          pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
          inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

class LossScaling : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crema_loss_scaler_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Solver> MakeSolver(SolverParameter::Amp amp, float initial_scale = 65536,
                                     int window = 2000, bool random_data = true) const {
    SolverParameter param;
    std::string net = kNet;
    // A resumed solver draws its data afresh from the seed: the resume test needs fixed data.
    if (!random_data)
      net.replace(net.find("type: \"gaussian\" std: 1"), 23, "type: \"constant\" value: 0.5");
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(net, param.mutable_net_param()));
    param.set_base_lr(0.05f);
    param.set_momentum(0.9f);
    param.set_lr_policy("fixed");
    param.set_max_iter(1000);
    param.set_display(0);
    param.set_random_seed(3);
    param.set_snapshot_after_train(false);
    param.set_snapshot_prefix((dir_ / "small").string());
    param.set_metrics_log(false);
    param.set_tensorboard(false);
    param.set_amp(amp);
    param.set_amp_loss_scale(initial_scale);
    param.set_amp_scale_window(window);
    return Solver::Create(param, SolverOptions{});
  }
  static std::vector<std::vector<float>> Weights(const Solver& solver) {
    std::vector<std::vector<float>> weights;
    for (const Blob* p : solver.net()->learnable_params())
      weights.emplace_back(p->cpu_data<float>(), p->cpu_data<float>() + p->count());
    return weights;
  }
  static std::string StateOf(const std::string& model) {
    return model.substr(0, model.size() - std::string(".caffemodel").size()) + ".solverstate";
  }

  fs::path dir_;
};

TEST_F(LossScaling, OverflowSkipsTheUpdateHalvesTheScaleAndTrainingRecovers) {
  // 2^40 times any gradient of this net overflows float16 (largest 65504).
  auto solver = MakeSolver(SolverParameter::FP16, std::ldexp(1.0f, 40), 4);
  EXPECT_EQ(solver->loss_scale(), std::ldexp(1.0, 40));
  const auto initial = Weights(*solver);
  solver->Step(1);
  EXPECT_EQ(Weights(*solver), initial) << "the overflowed iteration must not update";
  EXPECT_EQ(solver->loss_scale(), std::ldexp(1.0, 39));
  EXPECT_EQ(solver->iter(), 1);
  // It halves until the gradients fit, then trains; clean windows of 4 double it again.
  solver->Step(79);
  EXPECT_NE(Weights(*solver), initial);
  EXPECT_LT(solver->loss_scale(), std::ldexp(1.0, 39));
  EXPECT_GE(solver->loss_scale(), 1.0);
  const double trained_loss = solver->net()->Forward();
  auto plain = MakeSolver(SolverParameter::AMP_OFF);
  const double initial_loss = plain->net()->Forward();
  EXPECT_LT(trained_loss, 0.5 * initial_loss) << "the label is constant: easy to learn";
}

TEST_F(LossScaling, CleanIterationsDoubleTheScale) {
  auto solver = MakeSolver(SolverParameter::FP16, 8, 3);
  solver->Step(3);
  EXPECT_EQ(solver->loss_scale(), 16);
  solver->Step(2);
  EXPECT_EQ(solver->loss_scale(), 16);
  solver->Step(1);
  EXPECT_EQ(solver->loss_scale(), 32);
}

TEST_F(LossScaling, ResumedFp16RunEqualsTheUninterruptedOneBitForBit) {
  // An early overflow and a short window, so the scale moves on both sides of the snapshot.
  const float initial = std::ldexp(1.0f, 30);
  auto straight = MakeSolver(SolverParameter::FP16, initial, 3, false);
  straight->Step(20);
  auto first = MakeSolver(SolverParameter::FP16, initial, 3, false);
  first->Step(9);
  const std::string state = StateOf(first->Snapshot());
  SolverState saved;
  ReadBinaryProto(state, &saved);
  ASSERT_TRUE(saved.has_amp_loss_scale());
  EXPECT_EQ(saved.amp_loss_scale(), first->loss_scale());
  auto resumed = MakeSolver(SolverParameter::FP16, initial, 3, false);
  resumed->Restore(state);
  EXPECT_EQ(resumed->loss_scale(), first->loss_scale());
  resumed->Step(11);
  EXPECT_EQ(resumed->loss_scale(), straight->loss_scale());
  EXPECT_EQ(Weights(*resumed), Weights(*straight));
}

TEST_F(LossScaling, Bf16NeedsNoScaler) {
  auto solver = MakeSolver(SolverParameter::BF16);
  EXPECT_EQ(solver->net()->amp(), Amp::kBFloat16);
  EXPECT_EQ(solver->loss_scale(), 1);
  const double initial_loss = solver->net()->Forward();
  solver->Step(40);
  EXPECT_LT(solver->net()->Forward(), 0.5 * initial_loss);
  // And its state holds no scale.
  SolverState saved;
  ReadBinaryProto(StateOf(solver->Snapshot()), &saved);
  EXPECT_FALSE(saved.has_amp_loss_scale());
}

TEST_F(LossScaling, BadSettingsAreConfigErrors) {
  EXPECT_THROW(MakeSolver(SolverParameter::FP16, 0), ConfigError);
  EXPECT_THROW(MakeSolver(SolverParameter::FP16, 8, 0), ConfigError);
}

}  // namespace
}  // namespace crema
