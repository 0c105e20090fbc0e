// `crema sweep`: a grid of runs of a net whose losses are known in closed form, ranked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "image_tool_util.hpp"
#include "regression_solver.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RegressionLoss;
using testing::RunCrema;

std::vector<std::vector<std::string>> ReadTsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    rows.emplace_back();
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, '\t')) rows.back().push_back(cell);
  }
  return rows;
}

using SweepTest = testing::RegressionSolverTest;

TEST_F(SweepTest, TwoByOneGridRankedByLoss) {
  const auto r = RunCrema("sweep --solver " + solver_ +
                          " --grid base_lr=0.1,0.5 --grid net.ip.inner_product_param."
                          "weight_filler.value=0 --set max_iter=3 --parallel 2");
  ASSERT_EQ(r.rc, 0) << r.output;
  // Default folder: beside the snapshots.
  const auto rows = ReadTsv(prefix_.substr(0, prefix_.rfind('/')) + "/sweep/results.tsv");
  ASSERT_EQ(rows.size(), 3u) << r.output;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"rank", "run", "base_lr",
                                               "net.ip.inner_product_param.weight_filler.value",
                                               "loss", "status"}));
  // "loss": lower is better, so lr 0.5 (closer to the optimum after 3 steps) comes first.
  ASSERT_EQ(rows[1].size(), 6u);
  EXPECT_EQ(rows[1][0], "1");
  EXPECT_EQ(rows[1][2], "0.5");
  EXPECT_NEAR(std::stod(rows[1][4]), RegressionLoss(0.5, 3), 1e-5);
  EXPECT_EQ(rows[1][5], "ok");
  EXPECT_EQ(rows[2][0], "2");
  EXPECT_EQ(rows[2][2], "0.1");
  EXPECT_NEAR(std::stod(rows[2][4]), RegressionLoss(0.1, 3), 1e-5);
  // Each run has its folder with its snapshots, effective solver and log.
  const std::string run = prefix_.substr(0, prefix_.rfind('/')) + "/sweep/" + rows[1][1];
  EXPECT_TRUE(fs::exists(run + "/reg_iter_3.caffemodel")) << run;
  EXPECT_TRUE(fs::exists(run + "/reg_solver.prototxt")) << run;
  EXPECT_TRUE(fs::exists(run + "/train.log")) << run;
  EXPECT_TRUE(fs::exists(prefix_.substr(0, prefix_.rfind('/')) + "/sweep/results.md"));
  EXPECT_NE(r.output.find("ranked by loss (lower is better)"), std::string::npos) << r.output;
}

TEST_F(SweepTest, MetricModeAndFailedRun) {
  // num_output 0 fails in its run (exit 2); the sweep goes on and reports it.
  const std::string out = dir_ + "/out";
  const auto r = RunCrema("sweep --solver " + solver_ +
                          " --grid net.ip.inner_product_param.num_output=1,0"
                          " --grid base_lr=0.5,0.1 --set max_iter=2 --metric loss"
                          " --metric_mode max --out " +
                          out);
  ASSERT_EQ(r.rc, 0) << r.output;
  const auto rows = ReadTsv(out + "/results.tsv");
  ASSERT_EQ(rows.size(), 5u) << r.output;
  // max: the higher loss (lr 0.1) first, then lr 0.5, then the two failures unranked.
  EXPECT_EQ(rows[1][0], "1");
  EXPECT_EQ(rows[1][3], "0.1");
  EXPECT_NEAR(std::stod(rows[1][4]), RegressionLoss(0.1, 2), 1e-5);
  EXPECT_EQ(rows[2][3], "0.5");
  for (int i : {3, 4}) {
    EXPECT_EQ(rows[i][0], "-");
    EXPECT_EQ(rows[i][2], "0");
    EXPECT_NE(rows[i].back().find("failed (exit 2"), std::string::npos) << rows[i].back();
  }
}

TEST_F(SweepTest, BadGridIsAnErrorBeforeAnyRun) {
  const auto r =
      RunCrema("sweep --solver " + solver_ + " --grid base_lrr=0.1,0.2 --out " + dir_ + "/out");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("did you mean \"base_lr\"?"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/out"));
}

}  // namespace
}  // namespace crema
