// SSD training end to end, as examples/ssd_shapes/run.sh does it, at a size the test suite
// affords: make_shapes.py images -> convert-annoset LMDBs -> make_nets.py prototxts -> `crema
// train` (AnnotatedData with the SSD augmentation, MultiBoxLoss, eval_type "detection") ->
// `crema test` (mAP) -> `crema detect` -> fine-tuning to one class more with --skip-mismatched.
// The checks: the loss falls, the test reports a mAP in [0, 1] with every class, the class heads
// and only they are re-initialised when the class count changes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "support/requires.hpp"
#include "support/run_command.hpp"

namespace crema::testing {
namespace {

// The values of `name = X` in a training log, in order.
std::vector<double> Values(const std::string& log, const std::string& name) {
  std::vector<double> values;
  const std::regex pattern(name + " = ([-0-9.e+]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), pattern);
       it != std::sregex_iterator(); ++it)
    values.push_back(std::stod((*it)[1]));
  return values;
}

class SsdTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CREMA_SKIP_WITHOUT_OPENCV();
    if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
      GTEST_SKIP() << "no /usr/bin/python3 with numpy";
    dir_ = ::testing::TempDir() + "/ssd_train";
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
  }

  // A data set of `classes` in dir_/name, with its LMDBs and nets (background counted).
  void MakeSet(const std::string& name, const std::string& classes, int num_classes) {
    const std::string source = CREMA_SOURCE_DIR;
    const std::string set = dir_ + "/" + name;
    CommandResult r = RunCommand("/usr/bin/python3 " + source +
                                 "/data/detection/make_shapes.py --num-train 48 --num-test 16 "
                                 "--classes " +
                                 classes + " --out " + set);
    ASSERT_EQ(r.rc, 0) << r.output;
    for (const char* split : {"train", "test"}) {
      r = RunCrema("convert-annoset " + set + "/ " + set + "/" + split + ".txt " + set + "/" +
                   split + "_lmdb --label_map_file " + set +
                   "/labelmap.prototxt --encoded --encode_type png --progress off");
      ASSERT_EQ(r.rc, 0) << r.output;
    }
    r = RunCommand(
        "/usr/bin/python3 " + source + "/examples/ssd_shapes/make_nets.py --num-classes " +
        std::to_string(num_classes) + " --out " + dir_ + " --data " + set + " --name " + name);
    ASSERT_EQ(r.rc, 0) << r.output;
  }

  // Trains dir_/<name>_train_test.prototxt for `iterations` with one test at the end; snapshots
  // go to dir_/<name>_run_iter_<iterations>.*.
  CommandResult Train(const std::string& name, int iterations, const std::string& flags = "") {
    const std::string solver = dir_ + "/" + name + "_solver.prototxt";
    const std::string it = std::to_string(iterations);
    RunCommand("printf '%s\\n' 'net: \"" + dir_ + "/" + name +
               "_train_test.prototxt\"' 'type: \"Adam\"' 'base_lr: 0.001' 'lr_policy: \"fixed\"' "
               "'max_iter: " +
               it + "' 'display: 5' 'test_iter: 1' 'test_interval: " + it +
               "' 'test_initialization: false' 'eval_type: \"detection\"' 'ap_version: "
               "\"11point\"' 'show_per_class_result: true' 'snapshot: " +
               it + "' 'snapshot_prefix: \"" + dir_ + "/" + name +
               "_run\"' 'random_seed: 3' 'solver_mode: CPU' > " + solver);
    return RunCrema("train --solver " + solver + " --progress off " + flags);
  }

  std::string dir_;
};

TEST_F(SsdTrainTest, TrainsScoresDetectsAndFineTunes) {
  MakeSet("shapes", "circle,square,triangle", 4);
  const CommandResult train = Train("shapes", 40);
  ASSERT_EQ(train.rc, 0) << train.output;
  const std::vector<double> losses = Values(train.output, "loss");
  ASSERT_GE(losses.size(), 2u) << train.output;
  EXPECT_LT(losses.back(), losses.front()) << train.output;
  const std::vector<double> map = Values(train.output, "Test net output #0: detection_eval");
  ASSERT_EQ(map.size(), 1u) << train.output;
  EXPECT_GE(map[0], 0);
  EXPECT_LE(map[0], 1);
  for (const char* line : {"class1: ", "class2: ", "class3: "})
    EXPECT_NE(train.output.find(line), std::string::npos) << line << "\n" << train.output;

  const std::string weights = dir_ + "/shapes_run_iter_40.caffemodel";
  const CommandResult test = RunCrema("test --model " + dir_ + "/shapes_train_test.prototxt " +
                                      "--weights " + weights + " --iterations 1");
  ASSERT_EQ(test.rc, 0) << test.output;
  EXPECT_TRUE(std::regex_search(test.output,
                                std::regex("detection_eval: mAP 11point = [0-9.e-]+, MaxIntegral = "
                                           "[0-9.e-]+, Integral = [0-9.e-]+ \\(3 classes")))
      << test.output;

  const CommandResult detect =
      RunCrema("detect --model " + dir_ + "/shapes_deploy.prototxt --weights " + weights +
               " --labelmap " + dir_ + "/shapes/labelmap.prototxt --threshold 0 --mean_values " +
               "127.5,127.5,127.5 --scale 0.007843 --out " + dir_ + "/boxes.csv " + dir_ +
               "/shapes/images/000049.png");
  ASSERT_EQ(detect.rc, 0) << detect.output;
  const CommandResult csv = RunCommand("head -2 " + dir_ + "/boxes.csv");
  EXPECT_TRUE(std::regex_search(
      csv.output, std::regex("^image,class_id,class_name,score,x1,y1,x2,y2\n.*000049.png,[123],"
                             "(circle|square|triangle),")))
      << csv.output;

  // One class more: the conf heads' shapes change, so they keep their fillers; the rest is copied.
  MakeSet("shapes4", "circle,square,triangle,cross", 5);
  const CommandResult tune = Train("shapes4", 10, "--weights " + weights + " --skip-mismatched");
  ASSERT_EQ(tune.rc, 0) << tune.output;
  for (const char* head :
       {"conv4_mbox_conf", "conv5_mbox_conf", "conv6_mbox_conf", "conv7_mbox_conf"})
    EXPECT_TRUE(std::regex_search(tune.output, std::regex(std::string("layer ") + head +
                                                          ": re-initialised from its fillers")))
        << head << "\n"
        << tune.output;
  EXPECT_TRUE(std::regex_search(tune.output, std::regex("layer conv4_mbox_loc: copied from")))
      << tune.output;
  EXPECT_NE(tune.output.find("class4: "), std::string::npos) << tune.output;
}

}  // namespace
}  // namespace crema::testing
