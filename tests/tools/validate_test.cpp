// `crema validate`: good and broken nets and solvers, every finding with its file:line.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "crema/layer_registry.hpp"
#include "image_tool_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RunCrema;
using testing::WriteText;

// Line 1 name, 2 data (Input with data 2x3 and label 2), 3-4 ip (InnerProduct, 4 outputs),
// 5 loss. Tests append or replace lines.
const char kGoodNet[] = R"(name: "good"
layer { name: "data" type: "Input" top: "data" top: "label" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 4 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"Input", "InnerProduct", "SoftmaxWithLoss", "Eltwise", "Data"})
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    dir_ = ::testing::TempDir() + "/validate_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  std::string Write(const std::string& name, const std::string& text) {
    WriteText(dir_ + "/" + name, text);
    return dir_ + "/" + name;
  }
  std::string dir_;
};

TEST_F(ValidateTest, GoodNetIsValid) {
  const auto r = RunCrema("validate " + Write("good.prototxt", kGoodNet));
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "good.prototxt: valid (0 warning(s))")) << r.output;
}

TEST_F(ValidateTest, NetOfOnePhaseIsCheckedInThatPhase) {
  // As the SSD branch's train.prototxt: the only input is TRAIN's, so TEST is not built (it would
  // miss "data"); a mistake in the TRAIN net is still found.
  std::string text = kGoodNet;
  text.replace(text.find("top: \"label\""), 0, "include { phase: TRAIN } ");
  auto r = RunCrema("validate " + Write("train.prototxt", text));
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "train.prototxt: valid (0 warning(s))")) << r.output;
  text.replace(text.find("bottom: \"ip\""), 12, "bottom: \"ipp\"");
  r = RunCrema("validate " + Write("broken.prototxt", text));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "bottom \"ipp\" is not produced")) << r.output;
  EXPECT_FALSE(Contains(r.output, "[TEST]")) << r.output;
}

TEST_F(ValidateTest, EveryTypoWithSuggestionAndLine) {
  std::string text = kGoodNet;
  text.replace(text.find("num_output"), 10, "num_ouput");
  text += "layer { name: \"x\" type: \"ReLU\" bottom: \"ip\" top: \"x\" relu_parm { } }\n";
  const std::string path = Write("typo.prototxt", text);
  const auto r = RunCrema("validate " + path);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, path + ":4:31: unknown field \"num_ouput\" in "
                                        "InnerProductParameter; did you mean \"num_output\"?"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, path + ":6:54: unknown field \"relu_parm\"")) << r.output;
  EXPECT_TRUE(Contains(r.output, "did you mean \"relu_param\"?")) << r.output;
}

TEST_F(ValidateTest, MissingBottomAndShapeErrorBothReported) {
  std::string text = kGoodNet;
  text.replace(text.find("bottom: \"ip\""), 12, "bottom: \"iq\"");  // line 5: missing bottom
  // line 6: Eltwise of a 2x4 and a 2x3 blob; line 7 reads its top.
  text +=
      "layer { name: \"sum\" type: \"Eltwise\" bottom: \"ip\" bottom: \"data\" top: \"sum\" }\n";
  text +=
      "layer { name: \"after\" type: \"InnerProduct\" bottom: \"sum\" top: \"after\" "
      "inner_product_param { num_output: 1 } }\n";
  const std::string path = Write("broken.prototxt", text);
  const auto r = RunCrema("validate " + path);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(path + ":5:[0-9]+: layer \"loss\" \\(SoftmaxWithLoss\\): bottom "
                                  "\"iq\" is not produced by any earlier layer; did you mean "
                                  "\"ip\"\\?")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("error: " + path +
                                                     ":6:[0-9]+: layer \"sum\" "
                                                     "\\(Eltwise\\): .*shape")))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "not shape-checked (they read blobs of the layers above): after"))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "2 error(s)")) << r.output;
}

TEST_F(ValidateTest, UnusedTopIsAWarning) {
  std::string text = kGoodNet;
  // line 6: a branch nobody reads (the last layer's top is the net's output, not a warning).
  text.insert(text.find("layer { name: \"loss\""),
              "layer { name: \"side\" type: \"InnerProduct\" bottom: \"data\" top: \"side\" "
              "inner_product_param { num_output: 2 } }\n");
  const std::string path = Write("unused.prototxt", text);
  const auto r = RunCrema("validate " + path);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("warning: " + path +
                                                     ":5:[0-9]+: layer \"side\" "
                                                     "\\(InnerProduct\\): top \"side\" is read "
                                                     "by no layer")))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "top \"loss\"")) << r.output;
  EXPECT_TRUE(Contains(r.output, "valid (1 warning(s))")) << r.output;
}

TEST_F(ValidateTest, AnnotatedDataWithoutItsDbIsShapeCheckedFromResizeParam) {
  // The SSD branch's nets resize every image to one size: the layers below are checked with a
  // 2 x 3 x 6 x 8 data top (the Reshape to 2 x 144 holds only for that count) and a 1 x 1 x 1 x 8
  // label.
  const std::string net = Write("ssd.prototxt", R"(name: "ssd"
layer { name: "data" type: "AnnotatedData" top: "data" top: "label" include { phase: TRAIN }
        transform_param { resize_param { resize_mode: WARP height: 6 width: 8 } }
        data_param { source: "/nonexistent/trainval_lmdb" batch_size: 2 backend: LMDB } }
layer { name: "flat" type: "Reshape" bottom: "data" top: "flat" reshape_param { shape { dim: 2 dim: 144 } } }
layer { name: "rows" type: "Reshape" bottom: "label" top: "rows" reshape_param { shape { dim: 1 dim: 8 } } }
layer { name: "silence" type: "Silence" bottom: "flat" bottom: "rows" }
)");
  const auto r = RunCrema("validate " + net);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "its tops are shape-checked from its parameters")) << r.output;
  EXPECT_FALSE(Contains(r.output, "not shape-checked")) << r.output;
  const auto inspect = RunCrema("inspect --model " + net + " --phase TRAIN");
  EXPECT_NE(inspect.rc, 0);  // the DB itself is needed to build the net for real
}

TEST_F(ValidateTest, SolverWithMissingDataAndTypo) {
  const std::string net = Write("net.prototxt", R"(name: "n"
layer { name: "mnist" type: "Data" top: "data" top: "label"
        data_param { source: "/nonexistent/train_lmdb" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)");
  const std::string solver =
      Write("solver.prototxt", "net: \"" + net + "\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\n");
  auto r = RunCrema("validate " + solver);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "warning: " + net +
                                     ":3:22: layer \"mnist\" (Data): source "
                                     "\"/nonexistent/train_lmdb\" does not exist"))
      << r.output;
  EXPECT_TRUE(Contains(r.output,
                       "not shape-checked (they read blobs of the layers above): ip, "
                       "loss"))
      << r.output;

  WriteText(solver, "net: \"" + net + "\"\nbase_lrate: 0.01\nlr_policy: \"fixed\"\n");
  r = RunCrema("validate " + solver);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, solver + ":2:1: unknown field \"base_lrate\" in "
                                          "SolverParameter; did you mean \"base_lr\"?"))
      << r.output;
}

// Legal settings that are almost certainly a mistake: warnings with their location.
TEST_F(ValidateTest, NegativeBaseLrAndNoIterationsWarn) {
  const std::string net = Write("net.prototxt", kGoodNet);
  const std::string solver = Write("solver.prototxt", "net: \"" + net +
                                                          "\"\nlr_policy: \"fixed\"\n"
                                                          "base_lr: -0.01\nmax_iter: 0\n");
  const auto r = RunCrema("validate " + solver);
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "warning: " + solver +
                                     ":3:1: base_lr is -0.01: a negative learning rate climbs "
                                     "the loss"))
      << r.output;
  EXPECT_TRUE(Contains(
      r.output, "warning: " + solver + ":4:1: max_iter is 0: no training iteration will run"))
      << r.output;
}

TEST_F(ValidateTest, SyntaxErrorAndSeveralFiles) {
  const std::string good = Write("good.prototxt", kGoodNet);
  const std::string bad = Write("bad.prototxt", "name: \"x\"\nlayer { name: \"a\" \n");
  const auto r = RunCrema("validate " + good + " " + bad);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, good + ": valid")) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("error: " + bad + ":[0-9]+:[0-9]+: ")))
      << r.output;
}

}  // namespace
}  // namespace crema
