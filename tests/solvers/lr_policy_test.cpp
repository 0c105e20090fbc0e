// LearningRateAt: each of Caffe's lr_policy formulas at chosen iterations, worked out by hand,
// and the ConfigErrors for settings a policy needs.
#include "solvers/lr_policy.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "crema/error.hpp"

namespace crema {
namespace {

SolverParameter Param(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param)) << text;
  return param;
}

std::string Where(const std::string& field) { return "solver.prototxt:" + field + ": "; }

double Rate(const std::string& text, int iter, int step = 0) {
  return LearningRateAt(Param(text), iter, step, Where);
}

TEST(LearningRateAt, Fixed) {
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'fixed' base_lr: 0.01", 0), 0.01);
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'fixed' base_lr: 0.01", 123456), 0.01);
}

TEST(LearningRateAt, Step) {
  const std::string p = "lr_policy: 'step' base_lr: 0.1 gamma: 0.5 stepsize: 10";
  EXPECT_FLOAT_EQ(Rate(p, 0), 0.1);
  EXPECT_FLOAT_EQ(Rate(p, 9), 0.1);
  EXPECT_FLOAT_EQ(Rate(p, 10), 0.05);
  EXPECT_FLOAT_EQ(Rate(p, 25), 0.025);
}

TEST(LearningRateAt, ExpAndInv) {
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'exp' base_lr: 1 gamma: 0.9", 2), 0.81);
  // inv: 0.1 * (1 + 0.5 * 6) ^ -0.5 = 0.1 / 2.
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'inv' base_lr: 0.1 gamma: 0.5 power: 0.5", 6), 0.05);
}

TEST(LearningRateAt, MultistepAdvancesOneStepAtATime) {
  const std::string p =
      "lr_policy: 'multistep' base_lr: 1 gamma: 0.1 stepvalue: 5 stepvalue: 8 stepvalue: 9";
  EXPECT_FLOAT_EQ(Rate(p, 4, 0), 1);
  EXPECT_FLOAT_EQ(Rate(p, 5, 0), 0.1);  // reaching stepvalue 5
  EXPECT_FLOAT_EQ(Rate(p, 7, 1), 0.1);
  EXPECT_FLOAT_EQ(Rate(p, 8, 1), 0.01);
  // Caffe's step moves by one per iteration, even when iter is past two stepvalues.
  EXPECT_FLOAT_EQ(Rate(p, 20, 1), 0.01);
  EXPECT_FLOAT_EQ(Rate(p, 20, 3), 0.001);
}

TEST(LearningRateAt, PolyAndSigmoid) {
  // poly: 0.2 * (1 - 25 / 100) ^ 2 = 0.1125.
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'poly' base_lr: 0.2 power: 2 max_iter: 100", 25), 0.1125);
  EXPECT_FLOAT_EQ(Rate("lr_policy: 'poly' base_lr: 0.2 power: 2 max_iter: 100", 100), 0);
  // sigmoid: at iter == stepsize half the base rate.
  const std::string s = "lr_policy: 'sigmoid' base_lr: 0.4 gamma: 0.1 stepsize: 50";
  EXPECT_FLOAT_EQ(Rate(s, 50), 0.2);
  EXPECT_FLOAT_EQ(Rate(s, 60), 0.4 / (1 + std::exp(-1.0)));
}

// The message of the ConfigError `text` raises at iteration 0.
std::string ErrorOf(const std::string& text) {
  try {
    Rate(text, 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << text;
  return "";
}

TEST(LearningRateAt, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf("base_lr: 0.1"),
            "solver.prototxt:lr_policy: lr_policy is not set; expected one of fixed, step, exp, "
            "inv, multistep, poly, sigmoid");
  EXPECT_EQ(ErrorOf("lr_policy: 'Fixed'")
                .find("solver.prototxt:lr_policy: lr_policy: unknown "
                      "learning rate policy \"Fixed\""),
            0u);
  EXPECT_EQ(ErrorOf("lr_policy: 'step' gamma: 0.1").rfind("solver.prototxt:stepsize: ", 0), 0u);
  EXPECT_EQ(ErrorOf("lr_policy: 'exp' gamma: -1").rfind("solver.prototxt:gamma: ", 0), 0u);
  EXPECT_EQ(ErrorOf("lr_policy: 'poly' power: 1").rfind("solver.prototxt:max_iter: ", 0), 0u);
}

}  // namespace
}  // namespace crema
