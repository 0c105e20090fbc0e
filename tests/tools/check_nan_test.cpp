// --check-nan: train and test stop at the first layer whose outputs or gradients are not finite,
// naming the layer, the blob and the iteration; without it the loss check names only the
// iteration.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crema/layer_registry.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RunCrema;
using testing::WriteText;

// data (2x3, all `value`) -> ip (4 outputs, weights `w`, bias 0) -> `mid` -> loss against 1s.
std::string Net(double value, double w, const std::string& mid) {
  return "name: \"nan\"\n"
         "layer { name: \"data\" type: \"DummyData\" top: \"data\" top: \"target\"\n"
         "  dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 4 }\n"
         "    data_filler { type: \"constant\" value: " +
         std::to_string(value) +
         " } data_filler { type: \"constant\" value: 1 } } }\n"
         "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
         "  inner_product_param { num_output: 4 weight_filler { type: \"constant\" value: " +
         std::to_string(w) + " } } }\n" + mid +
         "layer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"out\" bottom: \"target\" "
         "top: \"loss\" }\n";
}

class CheckNanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"DummyData", "InnerProduct", "Log", "Power", "EuclideanLoss"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    dir_ = ::testing::TempDir() + "/check_nan_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // Writes the net and a 3-iteration solver; returns the solver's path.
  std::string Solver(const std::string& net) {
    WriteText(dir_ + "/net.prototxt", net);
    WriteText(dir_ + "/solver.prototxt",
              "net: \"" + dir_ +
                  "/net.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\n"
                  "max_iter: 3\ndisplay: 1\nsnapshot_after_train: false\n");
    return dir_ + "/solver.prototxt";
  }
  std::string dir_;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// log(x - 100) of values near 1: NaN in the forward pass of "bad".
const char kLogOfNegative[] =
    "layer { name: \"bad\" type: \"Log\" bottom: \"ip\" top: \"out\" log_param { shift: -100 } "
    "}\n";

TEST_F(CheckNanTest, ForwardNanNamesLayerOutputAndIteration) {
  const std::string solver = Solver(Net(1, 0.1, kLogOfNegative));
  const auto r = RunCrema("train --solver " + solver + " --check-nan");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "layer \"bad\" (Log) produced a non-finite output \"out\""))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "forward pass at iteration 0")) << r.output;
}

TEST_F(CheckNanTest, WithoutTheFlagTheLossCheckStopsWithoutNamingTheLayer) {
  const std::string solver = Solver(Net(1, 0.1, kLogOfNegative));
  const auto r = RunCrema("train --solver " + solver);
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "nan at iteration 0; stopped before the update")) << r.output;
  EXPECT_FALSE(Contains(r.output, "--check-nan")) << r.output;
}

// sqrt(0) is finite but its derivative is infinite: the gradient of "ip" from "root".
TEST_F(CheckNanTest, BackwardInfinityNamesLayerAndInputGradient) {
  const std::string solver =
      Solver(Net(1, 0,
                 "layer { name: \"root\" type: \"Power\" "
                 "bottom: \"ip\" top: \"out\" power_param { power: 0.5 } }\n"));
  const auto r = RunCrema("train --solver " + solver + " --check-nan");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "layer \"root\" (Power) produced a non-finite gradient of input "
                       "\"ip\""))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "backward pass at iteration 0")) << r.output;
}

TEST_F(CheckNanTest, FiniteNetTrainsToTheEnd) {
  const std::string solver = Solver(Net(1, 0.1,
                                        "layer { name: \"pass\" type: \"Power\" "
                                        "bottom: \"ip\" top: \"out\" }\n"));
  const auto r = RunCrema("train --solver " + solver + " --check-nan");
  EXPECT_EQ(r.rc, 0) << r.output;
}

TEST_F(CheckNanTest, TestVerbNamesTheBatch) {
  WriteText(dir_ + "/w.prototxt", "");
  const std::string solver = Solver(Net(1, 0.1, kLogOfNegative));
  // Weights of the finite part, written by a 0-iteration run of the same net.
  const auto save = RunCrema("train --solver " + solver + " --set max_iter=0 --set " +
                             "snapshot_after_train=true --set snapshot_prefix=" + dir_ + "/w");
  ASSERT_EQ(save.rc, 0) << save.output;
  const auto r = RunCrema("test --model " + dir_ + "/net.prototxt --weights " + dir_ +
                          "/w_iter_0.caffemodel --iterations 2 --check-nan");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "layer \"bad\" (Log)")) << r.output;
  EXPECT_TRUE(Contains(r.output, "at iteration 0")) << r.output;
}

}  // namespace
}  // namespace crema
