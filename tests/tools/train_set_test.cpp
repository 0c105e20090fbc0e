// `crema train --set` (solver and layer fields, errors) and `--resume`, end to end on a net
// whose losses are known in closed form (regression_solver.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "crema/proto.hpp"
#include "crema/proto_io.hpp"
#include "image_tool_util.hpp"
#include "regression_solver.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RegressionLoss;
using testing::RunCrema;

// The "Test net #0: loss = X" value printed at the end, or NaN.
double FinalLoss(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("\nTest net #0: loss = (\\S+)"))) return NAN;
  return std::stod(m[1]);
}

class TrainSetTest : public testing::RegressionSolverTest {
 protected:
  SolverParameter Effective() const {
    SolverParameter param;
    ReadTextProto(prefix_ + "_solver.prototxt", &param);
    return param;
  }
};

TEST_F(TrainSetTest, SolverFieldsOfEveryKind) {
  const auto r = RunCrema("train --solver " + solver_ +
                          " --set max_iter=3 --set snapshot=3 --set base_lr=0.2"  // scalars
                          " --set solver_mode=CPU"                                // enum
                          " --set lr_policy=multistep --set stepvalue=5,7 --set stepvalue=9"
                          " --set train_state.level=1 --set test_state.stage=val");  // nested
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0.2, 3), 1e-5) << r.output;
  EXPECT_TRUE(fs::exists(prefix_ + "_iter_3.caffemodel"));
  EXPECT_TRUE(fs::exists(prefix_ + "_iter_3.solverstate"));
  EXPECT_FALSE(fs::exists(prefix_ + "_iter_10.caffemodel"));
  EXPECT_NE(r.output.find("--set max_iter: 10 -> 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--set stepvalue: [5, 7] -> [5, 7, 9]"), std::string::npos) << r.output;

  const SolverParameter param = Effective();
  EXPECT_EQ(param.max_iter(), 3);
  EXPECT_FLOAT_EQ(param.base_lr(), 0.2f);
  EXPECT_EQ(param.solver_mode(), SolverParameter::CPU);
  EXPECT_TRUE(param.has_solver_mode());
  EXPECT_EQ(param.lr_policy(), "multistep");
  ASSERT_EQ(param.stepvalue_size(), 3);
  EXPECT_EQ(param.stepvalue(0), 5);
  EXPECT_EQ(param.stepvalue(2), 9);
  EXPECT_EQ(param.train_state().level(), 1);
  ASSERT_EQ(param.test_state_size(), 1);
  ASSERT_EQ(param.test_state(0).stage_size(), 1);
  EXPECT_EQ(param.test_state(0).stage(0), "val");
  EXPECT_EQ(param.net(), net_);  // no net override: the net stays a file
  EXPECT_FALSE(param.has_net_param());
}

TEST_F(TrainSetTest, LayerFields) {
  // w0 = 1 and no learning: the loss stays (1 - 2)^2 / 2.
  auto r = RunCrema("train --solver " + solver_ +
                    " --set max_iter=2 --set base_lr=0"
                    " --set net.ip.inner_product_param.weight_filler.value=1");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0, 2, 1), 1e-5) << r.output;
  SolverParameter param = Effective();
  EXPECT_FALSE(param.has_net());  // inlined, with the override
  ASSERT_EQ(param.net_param().layer_size(), 3);
  EXPECT_FLOAT_EQ(param.net_param().layer(1).inner_product_param().weight_filler().value(), 1);

  // lr_mult 0 on every param block of ip freezes it; lr_mult 2 doubles the step.
  r = RunCrema("train --solver " + solver_ + " --set max_iter=2 --set net.ip.param.lr_mult=0");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0, 2), 1e-5) << r.output;
  r = RunCrema("train --solver " + solver_ + " --set max_iter=2 --set net.ip.param[0].lr_mult=2");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0.2, 2), 1e-5) << r.output;
  param = Effective();
  ASSERT_EQ(param.net_param().layer(1).param_size(), 1);
  EXPECT_FLOAT_EQ(param.net_param().layer(1).param(0).lr_mult(), 2);
}

TEST_F(TrainSetTest, BadOverridesAreConfigErrors) {
  const struct {
    const char* set;
    const char* expected;
  } cases[] = {
      {"base_lrr=0.1", "unknown field \"base_lrr\" in SolverParameter; did you mean \"base_lr\"?"},
      {"max_iter=ten", "\"ten\" is not a valid int32 for max_iter"},
      {"snapshot_format=HDF", "did you mean \"HDF5\"?"},
      {"train_state.levl=1", "unknown field \"levl\" in NetState; did you mean \"level\"?"},
      {"stepvalue[3]=1", "index 3 is out of range"},
      {"net.ipp.inner_product_param.num_output=2", "no layer named \"ipp\""},
      {"net.ip.inner_product_param.num_ouput=2", "did you mean \"num_output\"?"},
      {"max_iter", "expected FIELD=VALUE"},
  };
  for (const auto& c : cases) {
    const auto r = RunCrema("train --solver " + solver_ + " --set " + c.set);
    EXPECT_EQ(r.rc, 2) << c.set << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.set << "\n" << r.output;
    EXPECT_FALSE(fs::exists(prefix_ + "_solver.prototxt")) << c.set;
  }
}

TEST_F(TrainSetTest, ResumeTakesTheNewestSnapshot) {
  // Snapshots at 2, 4, 6, 8 and 10: the newest is 10, though "_iter_8" sorts after it as text.
  auto r = RunCrema("train --solver " + solver_ + " --set snapshot=2");
  ASSERT_EQ(r.rc, 0) << r.output;
  ASSERT_TRUE(fs::exists(prefix_ + "_iter_8.solverstate"));
  ASSERT_TRUE(fs::exists(prefix_ + "_iter_10.solverstate"));
  r = RunCrema("train --solver " + solver_ + " --resume --set max_iter=12 --set snapshot=0");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("newest snapshot is " + prefix_ + "_iter_10.solverstate"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Resumed at iteration 10"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the .solverstate holds only"), std::string::npos) << r.output;
  // SGD without momentum: 10 + 2 iterations are 12 iterations from the start.
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0.1, 12), 1e-5) << r.output;
  EXPECT_TRUE(fs::exists(prefix_ + "_iter_12.caffemodel"));
  // --snapshot auto is the same: now from 12.
  r = RunCrema("train --solver " + solver_ + " --snapshot auto --set max_iter=13");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("Resumed at iteration 12"), std::string::npos) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0.1, 13), 1e-5) << r.output;
  // Not both --resume and a file; not --resume with --weights.
  EXPECT_EQ(RunCrema("train --solver " + solver_ + " --resume --snapshot x.solverstate").rc, 2);
  EXPECT_EQ(RunCrema("train --solver " + solver_ + " --resume --weights x.caffemodel").rc, 2);
}

TEST_F(TrainSetTest, ResumeWithoutSnapshotStartsFromZero) {
  const auto r = RunCrema("train --solver " + solver_ + " --resume --set max_iter=3");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("starting from iteration 0"), std::string::npos) << r.output;
  EXPECT_NEAR(FinalLoss(r.output), RegressionLoss(0.1, 3), 1e-5) << r.output;
  EXPECT_TRUE(fs::exists(prefix_ + "_iter_3.caffemodel"));
}

}  // namespace
}  // namespace crema
